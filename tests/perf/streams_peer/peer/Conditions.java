package peer;

/** Equality and range tests on typed properties, and their conjunctions: the predicates the router evaluates. */
final class Conditions {
    private Conditions() {}

    enum Op { EQ, NE, LT, LE, GT, GE }

    /** A test on a missing property is false, whatever its operator (as an expression over it does not match). */
    abstract static class Test {
        final int slot;
        final Op op;

        Test(int slot, Op op) {
            this.slot = slot;
            this.op = op;
        }

        abstract boolean holds(Values values);

        static boolean compare(Op op, int order) {
            return switch (op) {
                case EQ -> order == 0;
                case NE -> order != 0;
                case LT -> order < 0;
                case LE -> order <= 0;
                case GT -> order > 0;
                case GE -> order >= 0;
            };
        }
    }

    static final class NumberTest extends Test {
        final long operand;

        NumberTest(int slot, Op op, long operand) {
            super(slot, op);
            this.operand = operand;
        }

        @Override
        boolean holds(Values values) {
            return values.present[slot] && compare(op, Long.compare(values.numbers[slot], operand));
        }
    }

    static final class TextTest extends Test {
        final String operand;

        TextTest(int slot, Op op, String operand) {
            super(slot, op);
            this.operand = operand;
        }

        @Override
        boolean holds(Values values) {
            return values.present[slot] && compare(op, values.texts[slot].compareTo(operand));
        }
    }

    static final class Conjunction {
        final Test[] tests;

        Conjunction(Test[] tests) {
            this.tests = tests;
        }

        boolean holds(Values values) {
            for (Test test : tests) {
                if (!test.holds(values)) {
                    return false;
                }
            }
            return true;
        }
    }

    static Test test(int slot, boolean integer, String op, String operand) {
        Op parsed = Op.valueOf(op.toUpperCase(java.util.Locale.ROOT));
        return integer ? new NumberTest(slot, parsed, Long.parseLong(operand)) : new TextTest(slot, parsed, operand);
    }
}
