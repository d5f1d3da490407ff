// Consume one topic read_committed with kafkajs and print one JSON line
// per event on stdout: {"event":"ready"} once the consumer has joined its
// group, {"event":"message",...} per delivered record. The pytest side
// decides what is right; this script only reports. It exits by itself
// after 90 s so a stuck run cannot outlive the test.
//
// usage: node lso_block.js <bootstrap host:port> <topic>
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic] = process.argv.slice(2);
if (!bootstrap || !topic) {
    process.stderr.write('usage: node lso_block.js <bootstrap> <topic>\n');
    process.exit(2);
}

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

// kafkajs logs to stdout by default; keep stdout for our events only.
const toStderr = () => ({ namespace, level, log }) => {
    process.stderr.write(JSON.stringify({ namespace, level, ...log }) + '\n');
};

const kafka = new Kafka({
    clientId: 'cairn-e2e-js',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    logCreator: toStderr,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
});

const consumer = kafka.consumer({
    groupId: 'js-lso-' + topic,
    readUncommitted: false,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 500,
});

consumer.on(consumer.events.GROUP_JOIN, (e) => {
    emit({ event: 'ready', assignment: e.payload.memberAssignment });
});

async function main() {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
        eachMessage: async ({ partition, message }) => {
            emit({
                event: 'message',
                partition,
                offset: Number(message.offset),
                value: message.value === null ? null : message.value.toString(),
            });
        },
    });
}

setTimeout(() => {
    emit({ event: 'timeout' });
    process.exit(3);
}, 90000).unref();

for (const sig of ['SIGTERM', 'SIGINT']) {
    process.on(sig, () => {
        consumer.disconnect().finally(() => process.exit(0));
    });
}

main().catch((err) => {
    emit({ event: 'error', message: String(err && err.stack || err) });
    process.exit(1);
});
