package peer;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.RecordMetadata;

/**
 * Routes one input record: its headers parsed once, then for each app whose filter it passes, the first of the
 * app's routes that holds (or the app's pending topic), as subroute's worker does for a workload in which at most
 * one subscription of an app matches a record. The routed record keeps the input's key, value, timestamp and
 * headers (minus any forged {@code subroute.*} one) and gets subroute's routing headers, in subroute's order.
 */
final class RouteProcessor implements FixedKeyProcessor<byte[], byte[], Routed> {
    // router/wire.py
    private static final String PREFIX = "subroute.";
    private static final String EXPIRATION = "subroute.expiration";
    private static final String SOURCE = "subroute.source";
    private static final String APP = "subroute.app";
    private static final String GROUP = "subroute.group";
    private static final String SUBSCRIPTION = "subroute.subscription";
    private static final String CONFIG_VERSION = "subroute.config-version";
    private static final String ROUTED_AT = "subroute.routed-at";

    private final Workload workload;
    private final Progress progress;
    private final Values values;
    private final byte[] version;
    private FixedKeyProcessorContext<byte[], Routed> context;
    private long stampedMs = -1;
    private byte[] stamp;

    RouteProcessor(Workload workload, Progress progress) {
        this.workload = workload;
        this.progress = progress;
        this.values = new Values(workload.properties.length);
        this.version = workload.version.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void init(FixedKeyProcessorContext<byte[], Routed> context) {
        this.context = context;
    }

    @Override
    public void process(FixedKeyRecord<byte[], byte[]> record) {
        progress.started();
        Headers input = record.headers();
        values.read(input, workload);
        byte[] source = null;
        for (Workload.App app : workload.apps) {
            if (!app.passes(values)) {
                continue;
            }
            if (source == null) {
                RecordMetadata where = context.recordMetadata().orElseThrow();
                source = (where.topic() + "/" + where.partition() + "/" + where.offset())
                        .getBytes(StandardCharsets.UTF_8);
            }
            Workload.Route route = app.first(values);
            Headers out = new RecordHeaders();
            for (Header header : input) {
                String key = header.key();
                if (!key.startsWith(PREFIX) || key.equals(EXPIRATION)) {
                    out.add(header);
                }
            }
            out.add(SOURCE, source);
            out.add(APP, app.nameBytes);
            String topic = app.pendingTopic;
            if (route != null) {
                out.add(GROUP, route.group);
                out.add(SUBSCRIPTION, route.subscription);
                topic = route.topic;
            }
            out.add(CONFIG_VERSION, version);
            out.add(ROUTED_AT, routedAt());
            context.forward(record.withValue(new Routed(topic, record.value())).withHeaders(out));
            progress.routed.incrementAndGet();
        }
        if (progress.processedOne()) {
            context.commit(); // the last expected record: commit without waiting for the interval
        }
    }

    private byte[] routedAt() {
        long now = System.currentTimeMillis();
        if (now != stampedMs) {
            stampedMs = now;
            stamp = Long.toString(now).getBytes(StandardCharsets.UTF_8);
        }
        return stamp;
    }
}
