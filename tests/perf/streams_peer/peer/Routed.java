package peer;

import java.util.Optional;
import java.util.Set;
import java.util.zip.CRC32;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.processor.RecordContext;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.apache.kafka.streams.processor.TopicNameExtractor;

/**
 * A routed value: the input's value bytes and the topic the router chose for them. Only the bytes are written;
 * the topic reaches the sink through {@link ByDestination}, Kafka Streams' dynamic routing.
 */
record Routed(String topic, byte[] value) {

    static Serde<Routed> serde() {
        Serializer<Routed> serializer = (topic, routed) -> routed == null ? null : routed.value();
        Deserializer<Routed> deserializer = (topic, bytes) -> {
            throw new UnsupportedOperationException("routed values are only written");
        };
        return Serdes.serdeFrom(serializer, deserializer);
    }

    static final class ByDestination implements TopicNameExtractor<byte[], Routed> {
        @Override
        public String extract(byte[] key, Routed routed, RecordContext context) {
            return routed.topic();
        }
    }

    /**
     * The partition of a keyed record as librdkafka's default partitioner (consistent_random) picks it, CRC-32 of the
     * key, so that subroute's and this router's placements can be compared partition for partition; it costs what
     * the Java client's murmur2 does. An unkeyed record is left to the producer.
     */
    static final class KeyCrc32 implements StreamPartitioner<byte[], Routed> {
        @Override
        public Optional<Set<Integer>> partitions(
                String topic, byte[] key, Routed routed, Headers headers, int partitions) {
            return of(key, partitions);
        }

        @Override
        @SuppressWarnings("removal") // still abstract in 4.4: implemented as the variant above
        public Optional<Set<Integer>> partitions(String topic, byte[] key, Routed routed, int partitions) {
            return of(key, partitions);
        }

        private static Optional<Set<Integer>> of(byte[] key, int partitions) {
            if (key == null) {
                return Optional.empty();
            }
            CRC32 crc = new CRC32();
            crc.update(key);
            return Optional.of(Set.of((int) (crc.getValue() % partitions)));
        }
    }
}
