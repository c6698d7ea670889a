package peer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What the router routes: typed properties read from headers, and per app its filter and its ordered routes, read
 * from the file tests/perf/peer_workload.py writes (tab-separated, one line per item, in order):
 *
 * <pre>
 * version  V                                     the config version stamped on routed records
 * property NAME  int|string                      a header bound to a type
 * app      NAME  PENDING_TOPIC                    starts an app
 * filter   NAME OP VALUE [NAME OP VALUE]...       one alternative of the app's filter (alternatives are OR'ed)
 * route    GROUP TOPIC SUBSCRIPTION [NAME OP VALUE]...  the app's next route: a conjunction of tests
 * </pre>
 *
 * OP is eq, ne, lt, le, gt or ge. An app without filter lines takes every record.
 */
final class Workload {
    final String version;
    final String[] properties;
    final boolean[] integer;
    final Map<String, Integer> slots;
    final App[] apps;

    private Workload(String version, List<String> properties, List<Boolean> integer, List<App> apps) {
        this.version = version;
        this.properties = properties.toArray(new String[0]);
        this.integer = new boolean[integer.size()];
        this.slots = new HashMap<>();
        for (int i = 0; i < this.properties.length; i++) {
            this.integer[i] = integer.get(i);
            this.slots.put(this.properties[i], i);
        }
        this.apps = apps.toArray(new App[0]);
    }

    /** One app: its filter's alternatives and its routes, tried in order (the first that holds takes the record). */
    static final class App {
        final String name;
        final byte[] nameBytes;
        final String pendingTopic;
        final List<Conditions.Conjunction> filter = new ArrayList<>();
        final List<Route> routes = new ArrayList<>();
        Conditions.Conjunction[] filterArray;
        Route[] routeArray;

        App(String name, String pendingTopic) {
            this.name = name;
            this.nameBytes = name.getBytes(StandardCharsets.UTF_8);
            this.pendingTopic = pendingTopic;
        }

        boolean passes(Values values) {
            if (filterArray.length == 0) {
                return true;
            }
            for (Conditions.Conjunction alternative : filterArray) {
                if (alternative.holds(values)) {
                    return true;
                }
            }
            return false;
        }

        /** The first route whose conjunction holds: a linear scan, no index. Null: none (the pending topic). */
        Route first(Values values) {
            for (Route route : routeArray) {
                if (route.when.holds(values)) {
                    return route;
                }
            }
            return null;
        }
    }

    /** A destination: the group topic and the routing headers a record sent there carries. */
    static final class Route {
        final String topic;
        final byte[] group;
        final byte[] subscription;
        final Conditions.Conjunction when;

        Route(String group, String topic, String subscription, Conditions.Conjunction when) {
            this.topic = topic;
            this.group = group.getBytes(StandardCharsets.UTF_8);
            this.subscription = subscription.getBytes(StandardCharsets.UTF_8);
            this.when = when;
        }
    }

    static Workload read(Path file) throws IOException {
        String version = "0";
        List<String> properties = new ArrayList<>();
        List<Boolean> integer = new ArrayList<>();
        Map<String, Integer> slots = new HashMap<>();
        List<App> apps = new ArrayList<>();
        int number = 0;
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            number++;
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\t", -1);
            String where = file + ":" + number + ": ";
            switch (f[0]) {
                case "version" -> version = f[1];
                case "property" -> {
                    if (!f[2].equals("int") && !f[2].equals("string")) {
                        throw new IllegalArgumentException(where + "type must be int or string: " + f[2]);
                    }
                    slots.put(f[1], properties.size());
                    properties.add(f[1]);
                    integer.add(f[2].equals("int"));
                }
                case "app" -> apps.add(new App(f[1], f[2]));
                case "filter" -> last(apps, where).filter.add(conjunction(f, 1, slots, integer, where));
                case "route" -> last(apps, where).routes.add(
                        new Route(f[1], f[2], f[3], conjunction(f, 4, slots, integer, where)));
                default -> throw new IllegalArgumentException(where + "unknown line kind " + f[0]);
            }
        }
        for (App app : apps) {
            app.filterArray = app.filter.toArray(new Conditions.Conjunction[0]);
            app.routeArray = app.routes.toArray(new Route[0]);
        }
        return new Workload(version, properties, integer, apps);
    }

    private static App last(List<App> apps, String where) {
        if (apps.isEmpty()) {
            throw new IllegalArgumentException(where + "a filter or route before any app");
        }
        return apps.get(apps.size() - 1);
    }

    private static Conditions.Conjunction conjunction(
            String[] f, int from, Map<String, Integer> slots, List<Boolean> integer, String where) {
        if ((f.length - from) % 3 != 0) {
            throw new IllegalArgumentException(where + "tests come in threes (NAME OP VALUE): " + Arrays.toString(f));
        }
        List<Conditions.Test> tests = new ArrayList<>();
        for (int i = from; i < f.length; i += 3) {
            Integer slot = slots.get(f[i]);
            if (slot == null) {
                throw new IllegalArgumentException(where + "undeclared property " + f[i]);
            }
            tests.add(Conditions.test(slot, integer.get(slot), f[i + 1], f[i + 2]));
        }
        return new Conditions.Conjunction(tests.toArray(new Conditions.Test[0]));
    }
}
