package cairn.tests;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * A stateless Kafka Streams application under exactly_once_v2, made to be
 * killed: IN -> flatMapValues (each value v becomes "v:a" and "v:b") ->
 * a pass-through processor -> OUT.
 *
 * The processor lets a test kill the program inside a transaction without
 * racing the commit.  After forwarding a record it "stalls" (prints
 * {"stalled": n} and sleeps, so the stream thread, which is also the one
 * that commits, never ends the open transaction) when the test has written
 * "stall" to stdin, or on its own once it has forwarded STALL_AFTER records
 * (0: never), so a test that reacts late still finds it stalled rather
 * than done.  It also sleeps THROTTLE_MS per record, so the test sees the
 * group's committed offsets move before the input is used up.
 *
 *   StreamsEos BOOTSTRAP APPLICATION_ID IN OUT STATE_DIR STALL_AFTER THROTTLE_MS
 *
 * Prints {"state": ...} on each state change and runs until killed.
 */
public final class StreamsEos {
    private static volatile boolean stallRequested;

    private static final class Stalling implements Processor<String, String, String, String> {
        private final long stallAfter, throttleMs;
        private ProcessorContext<String, String> context;
        private long forwarded;

        Stalling(long stallAfter, long throttleMs) {
            this.stallAfter = stallAfter;
            this.throttleMs = throttleMs;
        }

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
        }

        @Override
        public void process(Record<String, String> r) {
            context.forward(r);
            forwarded++;
            try {
                if (stallRequested || forwarded == stallAfter) {
                    Common.print(Json.obj("stalled", forwarded, "requested", stallRequested));
                    // Long past any test's patience; the test kills first.
                    Thread.sleep(600_000);
                    System.exit(3);
                }
                if (throttleMs > 0)
                    Thread.sleep(throttleMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], in = args[2], out = args[3], stateDir = args[4];
        long stallAfter = Long.parseLong(args[5]), throttleMs = Long.parseLong(args[6]);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        // Many small transactions, so a kill finds committed ones behind it.
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A killed instance leaves its member behind.  As a static member
        // (KIP-345) its restart takes that member's place and assignment
        // at once (KIP-814: no rebalance), where a dynamic one would wait
        // for the dead member's session to expire; the session outlasts a
        // JVM start on a busy machine.  And since a stateless application
        // gets a new process id, so a new transactional id, on each start,
        // the killed transaction stays open until the coordinator's
        // timeout aborts it: a short one keeps the output's LSO moving.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), appId + "-instance");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "30000");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), "5000");

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> source = builder.stream(in);
        source.flatMapValues(v -> List.of(v + ":a", v + ":b"))
              .process(() -> new Stalling(stallAfter, throttleMs))
              .to(out);

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

        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                     new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; )
                    if (line.trim().equals("stall"))
                        stallRequested = true;
            } catch (Exception e) {
                // stdin closed: nothing more will be asked.
            }
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        streams.start();
        stopped.await();
        streams.close();
        System.exit(2);
    }
}
