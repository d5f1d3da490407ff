package cairn.tests;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The AdminClient against the broker: topics, configs, the cluster,
 * producers, transactions and consumer groups.  Each step's result (or
 * the exception it ended with) goes under its name in one JSON object, so
 * one refusal does not hide the rest.
 *
 *   AdminOps BOOTSTRAP
 */
public final class AdminOps {
    static final Map<String, Object> out = new TreeMap<>();
    static final long T = 30;

    static void step(String name, Callable<Object> fn) {
        try {
            out.put(name, fn.call());
        } catch (Exception e) {
            out.put(name, Json.obj("error", Common.error(e)));
        }
    }

    static Object describeTopic(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
            .get(T, TimeUnit.SECONDS).get(topic);
        List<Object> parts = Json.list();
        for (TopicPartitionInfo p : d.partitions())
            parts.add(Json.obj("partition", p.partition(), "leader", p.leader().id(),
                               "replicas", p.replicas().stream().map(Node::id).toList(),
                               "isr", p.isr().stream().map(Node::id).toList()));
        return Json.obj("name", d.name(), "internal", d.isInternal(),
                        "topic_id", d.topicId().toString(), "partitions", parts);
    }

    static Object configs(Admin admin, ConfigResource r, Collection<String> names) throws Exception {
        Config c = admin.describeConfigs(List.of(r)).all().get(T, TimeUnit.SECONDS).get(r);
        Map<String, Object> m = new TreeMap<>();
        for (ConfigEntry e : c.entries())
            if (names.contains(e.name()))
                m.put(e.name(), Json.obj("value", e.value(), "source", e.source().toString(),
                                         "read_only", e.isReadOnly()));
        m.put("_count", c.entries().size());
        return m;
    }

    static Object group(Admin admin, String g) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g)).all()
            .get(T, TimeUnit.SECONDS).get(g);
        List<Object> members = Json.list();
        for (MemberDescription m : d.members())
            members.add(Json.obj("client_id", m.clientId(), "host", m.host(),
                                 "assignment", m.assignment().topicPartitions().stream()
                                     .map(TopicPartition::toString).sorted().toList()));
        return Json.obj("state", d.groupState().toString(), "type", d.type().toString(),
                        "assignor", d.partitionAssignor(), "coordinator", d.coordinator().id(),
                        "members", members);
    }

    static Object groupOffsets(Admin admin, String g) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(
                Map.of(g, new ListConsumerGroupOffsetsSpec()),
                new ListConsumerGroupOffsetsOptions().requireStable(true))
            .partitionsToOffsetAndMetadata(g).get(T, TimeUnit.SECONDS);
        Map<String, Object> o = new TreeMap<>();
        m.forEach((tp, om) -> o.put(tp.toString(), om == null ? null : om.offset()));
        return o;
    }

    static Object groupNames(Admin admin) throws Exception {
        List<Object> l = Json.list();
        for (GroupListing g : admin.listGroups().all().get(T, TimeUnit.SECONDS))
            l.add(Json.obj("group", g.groupId(), "type", g.type().map(Object::toString).orElse(null),
                           "protocol", g.protocol(),
                           "state", g.groupState().map(Object::toString).orElse(null)));
        return l;
    }

    static Object producers(Admin admin, TopicPartition tp) throws Exception {
        List<Object> l = Json.list();
        for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp)
                 .get(T, TimeUnit.SECONDS).activeProducers())
            l.add(Json.obj("producer_id", s.producerId(), "epoch", s.producerEpoch(),
                           "last_sequence", s.lastSequence(),
                           "coordinator_epoch", s.coordinatorEpoch().isPresent()
                               ? s.coordinatorEpoch().getAsInt() : null,
                           "open_txn_offset", s.currentTransactionStartOffset().isPresent()
                               ? s.currentTransactionStartOffset().getAsLong() : null));
        return l;
    }

    static Object transactions(Admin admin, ListTransactionsOptions o) throws Exception {
        List<Object> l = Json.list();
        for (TransactionListing t : admin.listTransactions(o).all().get(T, TimeUnit.SECONDS))
            l.add(Json.obj("transactional_id", t.transactionalId(), "producer_id", t.producerId(),
                           "state", t.state().toString()));
        return l;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        try (Admin admin = Common.admin(bootstrap)) {
            run(admin, bootstrap);
        }
        Common.print(out);
    }

    static void run(Admin admin, String bootstrap) throws Exception {
        // Topics.
        step("create", () -> {
            NewTopic a = new NewTopic("adm-a", 3, (short) 1)
                .configs(Map.of("retention.ms", "123456", "cleanup.policy", "delete"));
            NewTopic b = new NewTopic("adm-b", 1, (short) 1);
            admin.createTopics(List.of(a, b)).all().get(T, TimeUnit.SECONDS);
            return "ok";
        });
        step("create_again", () -> {
            admin.createTopics(List.of(new NewTopic("adm-a", 3, (short) 1))).all()
                .get(T, TimeUnit.SECONDS);
            return "ok";
        });
        step("create_bad_config", () -> {
            admin.createTopics(List.of(new NewTopic("adm-bad", 1, (short) 1)
                    .configs(Map.of("retention.ms", "soon")))).all().get(T, TimeUnit.SECONDS);
            return "ok";
        });
        step("create_bad_replication", () -> {
            admin.createTopics(List.of(new NewTopic("adm-bad2", 1, (short) 3))).all()
                .get(T, TimeUnit.SECONDS);
            return "ok";
        });
        step("list_topics", () -> new ArrayList<>(new java.util.TreeSet<>(
            admin.listTopics().names().get(T, TimeUnit.SECONDS))));
        step("describe_a", () -> describeTopic(admin, "adm-a"));
        step("describe_missing", () -> describeTopic(admin, "adm-none"));
        ConfigResource ta = new ConfigResource(ConfigResource.Type.TOPIC, "adm-a");
        step("configs_a", () -> configs(admin, ta, Set.of("retention.ms", "cleanup.policy",
                                                          "segment.bytes", "min.insync.replicas")));
        step("alter_a", () -> {
            admin.incrementalAlterConfigs(Map.of(ta, List.of(new AlterConfigOp(
                new ConfigEntry("retention.ms", "654321"), AlterConfigOp.OpType.SET))))
                .all().get(T, TimeUnit.SECONDS);
            return configs(admin, ta, Set.of("retention.ms"));
        });
        step("partitions_b", () -> {
            admin.createPartitions(Map.of("adm-b", NewPartitions.increaseTo(2))).all()
                .get(T, TimeUnit.SECONDS);
            return describeTopic(admin, "adm-b");
        });

        // The cluster and the broker's configs.
        step("cluster", () -> {
            DescribeClusterResult c = admin.describeCluster();
            Node ctl = c.controller().get(T, TimeUnit.SECONDS);
            return Json.obj("cluster_id", c.clusterId().get(T, TimeUnit.SECONDS),
                            "controller", ctl == null ? null : ctl.id(),
                            "nodes", c.nodes().get(T, TimeUnit.SECONDS).stream()
                                .map(n -> n.id() + "@" + n.host() + ":" + n.port()).toList());
        });
        step("configs_broker", () -> {
            int id = admin.describeCluster().nodes().get(T, TimeUnit.SECONDS).iterator().next().id();
            return configs(admin, new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(id)),
                           Set.of("transaction.max.timeout.ms", "log.retention.ms",
                                  "transaction.partition.verification.enable"));
        });

        // Producers and transactions: an idempotent producer on adm-b-0, an
        // open transaction on adm-a-1.
        TopicPartition b0 = new TopicPartition("adm-b", 0), a1 = new TopicPartition("adm-a", 1);
        try (KafkaProducer<String, String> p = Common.producer(bootstrap)) {
            for (int i = 0; i < 3; i++)
                p.send(new ProducerRecord<>("adm-b", 0, "k", "v" + i)).get();
        }
        step("producers_b0", () -> producers(admin, b0));
        try (KafkaProducer<String, String> tx = Common.txnProducer(bootstrap, "adm-tx")) {
            tx.initTransactions();
            tx.beginTransaction();
            tx.send(new ProducerRecord<>("adm-a", 1, "k", "open-0")).get();
            tx.send(new ProducerRecord<>("adm-a", 1, "k", "open-1")).get();
            step("txn_list", () -> transactions(admin, new ListTransactionsOptions()));
            step("txn_list_ongoing", () -> transactions(admin, new ListTransactionsOptions()
                .filterStates(List.of(TransactionState.ONGOING))));
            step("txn_list_committed", () -> transactions(admin, new ListTransactionsOptions()
                .filterStates(List.of(TransactionState.COMPLETE_COMMIT))));
            step("txn_describe_open", () -> Common.txnJson(Common.describeTxn(admin, "adm-tx")));
            step("txn_describe_missing", () -> Common.txnJson(Common.describeTxn(admin, "adm-none")));
            step("producers_a1_open", () -> producers(admin, a1));
            tx.commitTransaction();
            Common.waitFor(() -> Common.describeTxn(admin, "adm-tx").state() == TransactionState.COMPLETE_COMMIT);
            step("txn_describe_done", () -> Common.txnJson(Common.describeTxn(admin, "adm-tx")));
            step("producers_a1_done", () -> producers(admin, a1));
        }
        step("fence", () -> {
            admin.fenceProducers(List.of("adm-tx")).all().get(T, TimeUnit.SECONDS);
            return Common.txnJson(Common.describeTxn(admin, "adm-tx"));
        });

        // Consumer groups (the classic protocol).
        Properties cp = Common.consumerProps(bootstrap, "read_committed");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "adm-g");
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "adm-consumer");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of("adm-b"));
            long deadline = System.nanoTime() + Common.WAIT.toNanos();
            int got = 0;
            while (got < 3 && System.nanoTime() < deadline)
                got += c.poll(Duration.ofMillis(200)).count();
            c.commitSync(Common.WAIT);
            out.put("group_consumed", got);
            step("groups_list", () -> groupNames(admin));
            step("group_describe", () -> group(admin, "adm-g"));
            step("group_offsets", () -> groupOffsets(admin, "adm-g"));
            step("group_delete_active", () -> {
                admin.deleteConsumerGroups(List.of("adm-g")).all().get(T, TimeUnit.SECONDS);
                return "ok";
            });
        }
        step("group_describe_left", () -> group(admin, "adm-g"));
        step("group_reset", () -> {
            admin.alterConsumerGroupOffsets("adm-g", Map.of(b0, new OffsetAndMetadata(1)))
                .all().get(T, TimeUnit.SECONDS);
            return groupOffsets(admin, "adm-g");
        });
        step("group_offset_delete", () -> {
            admin.deleteConsumerGroupOffsets("adm-g", Set.of(b0)).all().get(T, TimeUnit.SECONDS);
            return groupOffsets(admin, "adm-g");
        });
        step("group_delete", () -> {
            admin.deleteConsumerGroups(List.of("adm-g")).all().get(T, TimeUnit.SECONDS);
            return groupNames(admin);
        });

        step("delete_b", () -> {
            admin.deleteTopics(List.of("adm-b")).all().get(T, TimeUnit.SECONDS);
            return new ArrayList<>(new java.util.TreeSet<>(admin.listTopics().names().get(T, TimeUnit.SECONDS)));
        });
    }
}
