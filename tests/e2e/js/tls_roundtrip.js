// Produce a few records over TLS with kafkajs (client certificate given),
// read them back, print one JSON line: {"sent":N,"values":[...]}.
//
// usage: node tls_roundtrip.js <bootstrap> <topic> <ca.pem> <cert> <key>
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, ca, cert, key] = process.argv.slice(2);
if (!key) {
    process.stderr.write('usage: node tls_roundtrip.js <bootstrap> <topic> ' +
                         '<ca.pem> <cert> <key>\n');
    process.exit(2);
}
setTimeout(() => { process.stderr.write('timed out\n'); process.exit(3); },
           90000).unref();

const kafka = new Kafka({
    clientId: 'cairn-e2e-js-tls',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, log }) => {
        process.stderr.write(JSON.stringify({ namespace, level, ...log }) +
                             '\n');
    },
    ssl: {
        ca: [fs.readFileSync(ca)],
        cert: fs.readFileSync(cert),
        key: fs.readFileSync(key),
        servername: 'localhost',
    },
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
});

async function main() {
    const n = 20;
    const producer = kafka.producer();
    await producer.connect();
    const messages = [];
    for (let i = 0; i < n; i++)
        messages.push({ value: 'js' + i });
    await producer.send({ topic, acks: -1, messages });
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId: 'js-tls-' + topic,
                                      maxWaitTimeInMs: 500 });
    const values = [];
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve) => {
        consumer.run({
            eachMessage: async ({ message }) => {
                values.push(message.value.toString());
                if (values.length >= n)
                    resolve();
            },
        });
    });
    await consumer.disconnect();
    process.stdout.write(JSON.stringify({ sent: n, values }) + '\n');
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack || e) + '\n');
    process.exit(1);
});
