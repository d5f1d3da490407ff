// A kafkajs transactional producer across the partitions of TOPIC (led by
// different brokers of a cluster): commit one transaction, abort one,
// commit another, then read the topic back read_committed from the start
// and print one JSON line: {"read": {partition: [values]}}.  The pytest
// side (tests/e2e/test_cluster_txn.py) decides what is right.  Exits by
// itself after 90 s so a stuck run cannot outlive the test.
//
// usage: node cluster_txn.js <bootstrap list> <topic> <partitions> <tid>
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, nparts, tid] = process.argv.slice(2);
if (!bootstrap || !topic || !nparts || !tid) {
    process.stderr.write('usage: node cluster_txn.js <bootstrap> <topic> '
                         + '<partitions> <transactional id>\n');
    process.exit(2);
}
const parts = Number(nparts);

const toStderr = () => ({ namespace, level, log }) => {
    process.stderr.write(JSON.stringify({ namespace, level, ...log }) + '\n');
};

const kafka = new Kafka({
    clientId: 'cairn-e2e-js-txn',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    logCreator: toStderr,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
});

async function transaction(producer, tag, commit) {
    const txn = await producer.transaction();
    for (let i = 0; i < 2 * parts; i++) {
        await txn.send({ topic, messages: [{ value: `${tag}-${i}`, partition: i % parts }] });
    }
    if (commit)
        await txn.commit();
    else
        await txn.abort();
}

async function main() {
    const producer = kafka.producer({
        transactionalId: tid, idempotent: true, maxInFlightRequests: 1,
    });
    await producer.connect();
    await transaction(producer, 'js-c1', true);
    await transaction(producer, 'js-a', false);
    await transaction(producer, 'js-c2', true);
    await producer.disconnect();

    // Read back: 2 * parts * 2 committed records expected, read_committed.
    const want = 4 * parts;
    const read = {};
    let got = 0;
    const consumer = kafka.consumer({
        groupId: 'js-txn-' + tid, readUncommitted: false,
        sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 500,
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve) => {
        consumer.run({
            eachMessage: async ({ partition, message }) => {
                (read[partition] = read[partition] || []).push(message.value.toString());
                if (++got >= want)
                    resolve();
            },
        });
    });
    // One more poll round so a record past the expected ones would show.
    await new Promise((r) => setTimeout(r, 1000));
    await consumer.disconnect();
    process.stdout.write(JSON.stringify({ read }) + '\n');
}

setTimeout(() => {
    process.stderr.write('cluster_txn.js: timed out\n');
    process.exit(3);
}, 90000).unref();

main().then(() => process.exit(0), (e) => {
    process.stderr.write(`cluster_txn.js: ${e.stack || e}\n`);
    process.exit(1);
});
