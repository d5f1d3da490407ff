// kafkajs against a Cairn cluster: create a topic with replication factor
// 3 through whichever broker the client picks (forwarded to the
// controller), produce to every partition (each through its leader),
// consume them back in a group.  Prints one JSON line:
// {"sent":N,"got":N,"leaders":{"0":id,...}}.
//
// usage: node cluster_roundtrip.js <bootstrap,...> <topic> <partitions>
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, partsArg] = process.argv.slice(2);
if (!partsArg) {
    process.stderr.write('usage: node cluster_roundtrip.js <bootstrap> ' +
                         '<topic> <partitions>\n');
    process.exit(2);
}
const partitions = parseInt(partsArg, 10);
setTimeout(() => { process.stderr.write('timed out\n'); process.exit(3); },
           120000).unref();

const kafka = new Kafka({
    clientId: 'cairn-e2e-js-cluster',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, log }) => {
        process.stderr.write(JSON.stringify({ namespace, level, ...log }) +
                             '\n');
    },
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
});

async function main() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: partitions, replicationFactor: 3 }],
    });
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const leaders = {};
    for (const p of md.topics[0].partitions)
        leaders[p.partitionId] = p.leader;
    await admin.disconnect();

    const n = 10 * partitions;
    const producer = kafka.producer({ idempotent: true });
    await producer.connect();
    const messages = [];
    for (let i = 0; i < n; i++)
        messages.push({ partition: i % partitions, value: 'js' + i });
    await producer.send({ topic, acks: -1, messages });
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId: 'js-cluster-' + topic,
                                      maxWaitTimeInMs: 500 });
    const values = new Set();
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve) => {
        consumer.run({
            eachMessage: async ({ message }) => {
                values.add(message.value.toString());
                if (values.size >= n)
                    resolve();
            },
        });
    });
    await consumer.disconnect();
    process.stdout.write(JSON.stringify({ sent: n, got: values.size,
                                          leaders }) + '\n');
}

main().then(() => process.exit(0), (e) => {
    process.stderr.write('error: ' + (e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
