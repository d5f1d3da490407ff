"""Raw DescribeConfigs v1 and IncrementalAlterConfigs v0 (kafka_wire
style), for the dynamic broker config tests: the error code and message
of each resource, and every entry with its synonyms."""

import struct

import kafka_wire as kw

DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
BROKER = 4
TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _array(items):
    return struct.pack(">i", len(items)) + b"".join(items)


def incremental_alter_request(corr, resources, validate_only=False):
    """resources: [(type, name, [(key, op, value)])]."""
    body = _array([
        struct.pack(">b", rtype) + kw.string(name) + _array([
            kw.string(k) + struct.pack(">b", op) + kw.string(v)
            for k, op, v in configs])
        for rtype, name, configs in resources])
    body += struct.pack(">?", validate_only)
    return kw.request(INCREMENTAL_ALTER_CONFIGS, 0, corr, body)


def parse_incremental_alter(body):
    """[(error_code, error_message, type, name)]."""
    r = kw.Reader(body)
    r.i32()
    r.i32()
    return [(r.i16(), r.string(), r.i8(), r.string())
            for _ in range(r.i32())]


def describe_request(corr, resources, synonyms=True):
    """resources: [(type, name, keys or None)]."""
    body = _array([
        struct.pack(">b", rtype) + kw.string(name) +
        (struct.pack(">i", -1) if keys is None
         else _array([kw.string(k) for k in keys]))
        for rtype, name, keys in resources])
    body += struct.pack(">?", synonyms)
    return kw.request(DESCRIBE_CONFIGS, 1, corr, body)


def parse_describe(body):
    """[(error_code, error_message, type, name, {key: entry})] where an
    entry is {value, read_only, source, sensitive, synonyms: [(name,
    value, source)]}."""
    r = kw.Reader(body)
    r.i32()
    r.i32()
    out = []
    for _ in range(r.i32()):
        err, msg, rtype, name = r.i16(), r.string(), r.i8(), r.string()
        entries = {}
        for _ in range(r.i32()):
            key = r.string()
            e = {"value": r.string(), "read_only": r.i8() != 0,
                 "source": r.i8(), "sensitive": r.i8() != 0}
            e["synonyms"] = [(r.string(), r.string(), r.i8())
                             for _ in range(r.i32())]
            entries[key] = e
        out.append((err, msg, rtype, name, entries))
    return out


class ConfigClient(kw.Client):
    def alter(self, resources, validate_only=False):
        return parse_incremental_alter(
            self.call(incremental_alter_request, resources, validate_only))

    def alter_broker(self, name, configs, validate_only=False):
        """(error_code, error_message) for one broker resource."""
        err, msg, _, _ = self.alter([(BROKER, name, configs)],
                                    validate_only)[0]
        return err, msg

    def describe(self, resources, synonyms=True):
        return parse_describe(self.call(describe_request, resources,
                                        synonyms))

    def describe_broker(self, name, keys=None):
        """(error_code, {key: entry})."""
        err, _, _, _, entries = self.describe([(BROKER, name, keys)])[0]
        return err, entries
