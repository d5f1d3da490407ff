package cairn.tests;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * A stateful Kafka Streams application under exactly_once_v2: IN ->
 * groupByKey -> count in an in-memory store (so a restart has no local
 * state and restores from the store's changelog, a compacted topic Streams
 * creates) -> OUT as "key -> count".  Sleeps THROTTLE_MS per record so a
 * test can kill it half way.
 *
 *   StreamsCount BOOTSTRAP APPLICATION_ID IN OUT STATE_DIR THROTTLE_MS
 *
 * Prints {"state": ...} on each state change and runs until killed.
 */
public final class StreamsCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], in = args[2], out = args[3], stateDir = args[4];
        long throttleMs = Long.parseLong(args[5]);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        // As StreamsEos: a static member takes the killed one's place at
        // once, and the killed transaction times out soon.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), appId + "-instance");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "30000");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), "5000");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
               .peek((k, v) -> {
                   if (throttleMs > 0) {
                       try {
                           Thread.sleep(throttleMs);
                       } catch (InterruptedException e) {
                           Thread.currentThread().interrupt();
                       }
                   }
               })
               .groupByKey()
               .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                          .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long())
                          // Every update goes to the changelog and OUT at
                          // once, inside the open transaction, so a kill
                          // leaves aborted records in both.
                          .withCachingDisabled())
               .toStream()
               .mapValues(c -> Long.toString(c))
               .to(out, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            Common.print(Json.obj("state", now.toString()));
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING)
                stopped.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            Common.print(Json.obj("error", Common.error(e)));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        stopped.await();
        streams.close();
        System.exit(2);
    }
}
