package peer;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams peer of subroute's worker (tests/perf/bench_streams_peer.py runs it): routes an input topic
 * as a {@link Workload} describes, until {@code --expected} input records are processed and their offsets
 * committed, then prints one line {@code RESULT records=N routed=M seconds=S processing_seconds=P}: seconds from
 * the first record processed until the committed offsets of the application's group reach the input's end (the
 * span subroute's timed worker reports), and until the last record was processed.
 *
 * <pre>
 * java -cp CLASSES:JARS/* peer.StreamsRouter --bootstrap HOST:PORT --input TOPIC --workload FILE
 *     --application-id ID --expected N [--guarantee at_least_once|exactly_once_v2] [--commit-interval-ms 500]
 *     [--threads 1] [--timeout-s 900] [--set NAME=VALUE]...
 * </pre>
 *
 * Producer settings as issue 26 measured the peer: linger.ms 20, batch.size 1 MB, acks all, idempotence;
 * {@code --set} overrides any Streams, producer or consumer setting after them.
 */
public final class StreamsRouter {
    private StreamsRouter() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        Properties overrides = new Properties();
        if (argv.length % 2 != 0) {
            usage("every option takes a value");
        }
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                usage("unexpected " + argv[i]);
            }
            if (argv[i].equals("--set")) {
                String[] pair = argv[i + 1].split("=", 2);
                if (pair.length != 2) {
                    usage("--set takes NAME=VALUE: " + argv[i + 1]);
                }
                overrides.setProperty(pair[0], pair[1]);
            } else {
                args.put(argv[i].substring(2), argv[i + 1]);
            }
        }
        String bootstrap = required(args, "bootstrap");
        String input = required(args, "input");
        String applicationId = required(args, "application-id");
        long expected = Long.parseLong(required(args, "expected"));
        Workload workload = Workload.read(Path.of(required(args, "workload")));

        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.getOrDefault("guarantee", "at_least_once"));
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.getOrDefault("commit-interval-ms", "500"));
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.getOrDefault("threads", "1"));
        config.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("streams-peer-").toString());
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        config.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), "20");
        config.put(StreamsConfig.producerPrefix(ProducerConfig.BATCH_SIZE_CONFIG), String.valueOf(1 << 20));
        config.put(StreamsConfig.producerPrefix(ProducerConfig.ACKS_CONFIG), "all");
        config.put(StreamsConfig.producerPrefix(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG), "true");
        config.putAll(overrides);

        Progress progress = new Progress(expected);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                .processValues(() -> new RouteProcessor(workload, progress))
                .to(new Routed.ByDestination(),
                        Produced.with(Serdes.ByteArray(), Routed.serde(), new Routed.KeyCrc32()));

        AtomicReference<Throwable> failure = new AtomicReference<>();
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
                KafkaStreams streams = new KafkaStreams(builder.build(), config)) {
            Map<TopicPartition, Long> ends = endOffsets(admin, input);
            streams.setUncaughtExceptionHandler(error -> {
                failure.set(error);
                progress.done.countDown();
                return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.start();
            long timeoutS = Long.parseLong(args.getOrDefault("timeout-s", "900"));
            if (!progress.done.await(timeoutS, TimeUnit.SECONDS)) {
                fail("timed out after " + timeoutS + " s with " + progress.processed.get() + " of " + expected
                        + " records processed");
            }
            if (failure.get() != null) {
                failure.get().printStackTrace();
                fail("a stream thread failed: " + failure.get());
            }
            awaitCommitted(admin, applicationId, ends, timeoutS);
            long committed = System.nanoTime();
            long first = progress.firstNanos();
            System.out.printf(Locale.ROOT, "RESULT records=%d routed=%d seconds=%.6f processing_seconds=%.6f%n",
                    progress.processed.get(), progress.routed.get(), (committed - first) / 1e9,
                    (progress.lastNanos() - first) / 1e9);
            System.out.flush();
            streams.close(Duration.ofSeconds(60));
        }
    }

    private static Map<TopicPartition, Long> endOffsets(Admin admin, String topic) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        description.partitions().forEach(p -> latest.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest()));
        Map<TopicPartition, Long> ends = new HashMap<>();
        for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e :
                admin.listOffsets(latest).all().get().entrySet()) {
            ends.put(e.getKey(), e.getValue().offset());
        }
        return ends;
    }

    /** Polls the group's committed offsets until every input partition's reaches its end offset. */
    private static void awaitCommitted(Admin admin, String group, Map<TopicPartition, Long> ends, long timeoutS)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
        while (true) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            boolean all = true;
            for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
                OffsetAndMetadata at = committed.get(end.getKey());
                if (end.getValue() > 0 && (at == null || at.offset() < end.getValue())) {
                    all = false;
                    break;
                }
            }
            if (all) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail("the input offsets were not committed within " + timeoutS + " s: " + committed);
            }
            Thread.sleep(5);
        }
    }

    private static String required(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            usage("--" + name + " is required");
        }
        return value;
    }

    private static void usage(String why) {
        System.err.println("peer.StreamsRouter: " + why);
        System.exit(2);
    }

    private static void fail(String why) {
        System.err.println("peer.StreamsRouter: " + why);
        System.exit(1);
    }
}
