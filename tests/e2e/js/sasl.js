// SASL with kafkajs: for each MECHANISM:USER:PASSWORD argument, produce
// three records to a topic of its own and read them back, then print one
// JSON line: {"event":"ok","mechanism":M} or {"event":"error",
// "mechanism":M,"type":<kafkajs error name>,"message":...}.  The pytest
// side decides what is right.  Exits by itself after 90 s.
//
// With --ca FILE first, over SASL_SSL: the server certificate is checked
// against that CA (and the name "localhost").
//
// usage: node sasl.js [--ca ca.pem] <bootstrap host:port> MECH:USER:PW...
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const argv = process.argv.slice(2);
const ssl = argv[0] === '--ca'
    ? { ca: [fs.readFileSync(argv[1])], servername: 'localhost' } : undefined;
const [bootstrap, ...specs] = ssl ? argv.slice(2) : argv;
if (!bootstrap || specs.length === 0) {
    process.stderr.write('usage: node sasl.js <bootstrap> MECH:USER:PW...\n');
    process.exit(2);
}
setTimeout(() => process.exit(3), 90000).unref();

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const toStderr = () => ({ namespace, level, log }) => {
    process.stderr.write(JSON.stringify({ namespace, level, ...log }) + '\n');
};

async function one(spec, i) {
    const [mechanism, username, password] = spec.split(':');
    const kafka = new Kafka({
        clientId: 'cairn-e2e-js-sasl',
        brokers: [bootstrap],
        sasl: { mechanism: mechanism.toLowerCase(), username, password },
        ssl,
        logLevel: logLevel.NOTHING,
        logCreator: toStderr,
        retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 },
    });
    const topic = 'js-sasl-' + i;
    const producer = kafka.producer();
    const consumer = kafka.consumer({ groupId: 'js-sasl-' + i,
                                      maxWaitTimeInMs: 200 });
    try {
        await producer.connect();
        await producer.send({ topic, acks: -1,
                              messages: [0, 1, 2].map((n) => ({
                                  value: 'v' + n })) });
        await consumer.connect();
        await consumer.subscribe({ topic, fromBeginning: true });
        const got = [];
        await new Promise((resolve, reject) => {
            const t = setTimeout(() => reject(new Error('timeout')), 30000);
            consumer.run({ eachMessage: async ({ message }) => {
                got.push(message.value.toString());
                if (got.length === 3) {
                    clearTimeout(t);
                    resolve();
                }
            } }).catch(reject);
        });
        emit({ event: 'ok', mechanism, values: got });
    } catch (e) {
        emit({ event: 'error', mechanism, type: e.name, message: e.message });
    } finally {
        await consumer.disconnect().catch(() => {});
        await producer.disconnect().catch(() => {});
    }
}

(async () => {
    for (let i = 0; i < specs.length; i++)
        await one(specs[i], i);
    process.exit(0);
})();
