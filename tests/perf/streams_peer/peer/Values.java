package peer;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/** One record's typed properties, read from its headers once; reused from record to record by one processor. */
final class Values {
    final boolean[] present;
    final long[] numbers;
    final String[] texts;

    Values(int properties) {
        present = new boolean[properties];
        numbers = new long[properties];
        texts = new String[properties];
    }

    /** A property whose header is missing, or not a decimal integer where an int is declared, is absent. */
    void read(Headers headers, Workload workload) {
        Arrays.fill(present, false);
        for (Header header : headers) {
            Integer slot = workload.slots.get(header.key());
            byte[] value = header.value();
            if (slot == null || value == null) {
                continue;
            }
            if (workload.integer[slot]) {
                present[slot] = parse(value, slot);
            } else {
                texts[slot] = new String(value, StandardCharsets.UTF_8);
                present[slot] = true;
            }
        }
    }

    /** Decimal text to a long, without making a String; false on anything else (overflow included). */
    private boolean parse(byte[] text, int slot) {
        int i = 0;
        boolean negative = false;
        if (text.length > 0 && (text[0] == '-' || text[0] == '+')) {
            negative = text[0] == '-';
            i = 1;
        }
        if (i == text.length) {
            return false;
        }
        long value = 0;
        for (; i < text.length; i++) {
            int digit = text[i] - '0';
            if (digit < 0 || digit > 9) {
                return false;
            }
            // accumulate negatively: Long.MIN_VALUE has no positive counterpart
            if (value < (Long.MIN_VALUE + digit) / 10) {
                return false;
            }
            value = value * 10 - digit;
        }
        if (!negative) {
            if (value == Long.MIN_VALUE) {
                return false;
            }
            value = -value;
        }
        numbers[slot] = value;
        return true;
    }
}
