"""Hand-made Kafka wire bits for tests that must send what no client would.

Kafka framing: every request and response is an INT32 big-endian size
followed by that many bytes. A request starts with a header:

    v1: api_key INT16, api_version INT16, correlation_id INT32,
        client_id NULLABLE_STRING (INT16 length, -1 = null)
    v2: v1 followed by tagged fields (UVARINT count, 0 = none)

Flexible API versions (see "flexibleVersions" in the message schemas) use
header v2 and compact encodings in the body; others use header v1. A
response starts with correlation_id INT32 (header v0), plus tagged fields
for flexible versions (header v1) -- except ApiVersions, whose response
header is always v0 (KIP-511) so a client can read the error of a version
the broker does not know.

Only the standard library is used; everything is explicit struct.pack.
"""

import socket
import struct
import time

API_PRODUCE = 0
API_FETCH = 1
API_METADATA = 3
API_API_VERSIONS = 18

UNSUPPORTED_VERSION = 35


def uvarint(n):
    """Unsigned LEB128 varint, as used for compact lengths and tags."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(s):
    """Classic STRING / NULLABLE_STRING (None encodes as length -1)."""
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def compact_string(s):
    """COMPACT_(NULLABLE_)STRING: uvarint(len + 1), 0 = null."""
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def request_header(api_key, api_version, correlation_id, client_id="e2e",
                   flexible=False):
    """Request header v1, or v2 (with an empty tag section) if flexible."""
    hdr = struct.pack(">hhi", api_key, api_version, correlation_id)
    hdr += string(client_id)
    if flexible:
        hdr += uvarint(0)
    return hdr


def frame(payload):
    """Prefix payload with its INT32 size."""
    return struct.pack(">i", len(payload)) + payload


def request(api_key, api_version, correlation_id, body=b"", client_id="e2e",
            flexible=False):
    """A complete framed request."""
    return frame(request_header(api_key, api_version, correlation_id,
                                client_id, flexible) + body)


def connect(host, port, timeout=5.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_exact(sock, n):
    """n bytes, or None if the peer closed first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv_frame(sock):
    """One response frame's body (after the size), or None on close.

    Raises socket.timeout if nothing complete arrives within the socket's
    timeout; a reset connection counts as closed.
    """
    try:
        size = recv_exact(sock, 4)
        if size is None:
            return None
        (n,) = struct.unpack(">i", size)
        if n < 0:
            raise ValueError("negative response size %d" % n)
        return recv_exact(sock, n)
    except (ConnectionResetError, BrokenPipeError):
        return None


def wait_closed(sock, timeout=5.0):
    """True if the peer closes the connection within timeout.

    Anything the broker sends meanwhile (e.g. an error response) is read
    and dropped.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


class Reader:
    """Sequential big-endian reader over a response body."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def _take(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("response truncated at %d" % self.pos)
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def i8(self):
        return self._take(">b")

    def i16(self):
        return self._take(">h")

    def i32(self):
        return self._take(">i")

    def i64(self):
        return self._take(">q")

    def uvarint(self):
        shift = value = 0
        while True:
            b = self._take(">B")
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode()

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode()

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def remaining(self):
        return len(self.data) - self.pos


def api_versions_request(correlation_id, version=3, client_id="e2e"):
    """ApiVersions request; v3+ is flexible and carries client software."""
    if version >= 3:
        body = compact_string("cairn-e2e") + compact_string("1.0")
        body += uvarint(0)
        return request(API_API_VERSIONS, version, correlation_id, body,
                       client_id, flexible=True)
    return request(API_API_VERSIONS, version, correlation_id, b"",
                   client_id)


def parse_api_versions(body, version):
    """Parse an ApiVersions response body (response header v0).

    Returns (correlation_id, error_code, {api_key: (min, max)}). For an
    unsupported request version the broker answers in the v0 layout, so
    pass version=0 to parse such an answer.
    """
    r = Reader(body)
    corr = r.i32()
    err = r.i16()
    flexible = version >= 3
    n = r.uvarint() - 1 if flexible else r.i32()
    apis = {}
    for _ in range(max(n, 0)):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        if flexible:
            r.skip_tags()
        apis[key] = (lo, hi)
    return corr, err, apis


def metadata_request_v1(correlation_id, topics=None, raw_count=None):
    """Metadata v1 (header v1, classic encodings).

    topics None asks for all topics (count -1). raw_count overrides the
    array count written, to send a count that lies.
    """
    if raw_count is not None:
        body = struct.pack(">i", raw_count)
    elif topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics))
        for t in topics:
            body += string(t)
    return request(API_METADATA, 1, correlation_id, body)


# ---------------------------------------------------------------------------
# Idempotent-producer helpers: record batches v2 with CRC32C, Produce v8,
# InitProducerId, DescribeProducers, ListOffsets and Fetch v11.

API_LIST_OFFSETS = 2
API_INIT_PRODUCER_ID = 22
API_DESCRIBE_PRODUCERS = 61

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48

INT32_MAX = 0x7FFFFFFF


def _crc32c_table():
    # Castagnoli polynomial, reflected (as iSCSI and Kafka use it).
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data, crc=0):
    """CRC32C of data (check value of b"123456789" is 0xE3069283)."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def varint(n):
    """Zigzag varint (signed), as record fields use."""
    return uvarint((n << 1) ^ (n >> 63))


def _record(offset_delta, ts_delta, key, value):
    body = struct.pack(">b", 0) + varint(ts_delta) + varint(offset_delta)
    for part in (key, value):
        if part is None:
            body += varint(-1)
        else:
            body += varint(len(part)) + part
    body += varint(0)                 # no headers
    return varint(len(body)) + body


def record_batch(values, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 base_timestamp=None, transactional=False, base_offset=0,
                 keys=None):
    """An uncompressed record batch v2 (magic 2) with a correct CRC32C.

    values: list of bytes; record i has timestamp base_timestamp + i, so
    the batch's max timestamp is base_timestamp + len(values) - 1.
    """
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    n = len(values)
    recs = b"".join(_record(i, i, keys[i] if keys else None, v)
                    for i, v in enumerate(values))
    attributes = 0x10 if transactional else 0
    after_crc = struct.pack(">hiqqqhii", attributes, n - 1, base_timestamp,
                            base_timestamp + n - 1, producer_id,
                            producer_epoch, base_sequence, n) + recs
    # batchLength counts from partitionLeaderEpoch to the end.
    batch_len = 4 + 1 + 4 + len(after_crc)
    return (struct.pack(">qiib", base_offset, batch_len, -1, 2)
            + struct.pack(">I", crc32c(after_crc)) + after_crc)


def bytes_field(b):
    """Classic BYTES / RECORDS: INT32 length (-1 = null) then the bytes."""
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


def produce_request_v8(correlation_id, topic, partition, records, acks=-1,
                       timeout_ms=10000, transactional_id=None):
    """Produce v8 (non-flexible) for one topic, partition and record set."""
    body = string(transactional_id) + struct.pack(">hi", acks, timeout_ms)
    body += struct.pack(">i", 1) + string(topic)
    body += struct.pack(">i", 1) + struct.pack(">i", partition)
    body += bytes_field(records)
    return request(API_PRODUCE, 8, correlation_id, body)


def parse_produce_v8(body):
    """Returns (correlation_id, [(topic, partition, error, base_offset,
    log_start_offset, error_message)])."""
    r = Reader(body)
    corr = r.i32()
    out = []
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            part, err, base = r.i32(), r.i16(), r.i64()
            r.i64()                       # log append time
            log_start = r.i64()
            for _ in range(max(r.i32(), 0)):
                r.i32()
                r.string()
            msg = r.string()
            out.append((topic, part, err, base, log_start, msg))
    r.i32()                               # throttle
    return corr, out


def init_producer_id_request(correlation_id, version=4, producer_id=-1,
                             producer_epoch=-1, transactional_id=None,
                             txn_timeout_ms=60000):
    """InitProducerId v0..v5 (flexible from v2, pid/epoch from v3)."""
    flexible = version >= 2
    if flexible:
        body = compact_string(transactional_id)
    else:
        body = string(transactional_id)
    body += struct.pack(">i", txn_timeout_ms)
    if version >= 3:
        body += struct.pack(">qh", producer_id, producer_epoch)
    if flexible:
        body += uvarint(0)
    return request(API_INIT_PRODUCER_ID, version, correlation_id, body,
                   flexible=flexible)


def parse_init_producer_id(body, version):
    """Returns (correlation_id, error, producer_id, epoch)."""
    r = Reader(body)
    corr = r.i32()
    if version >= 2:
        r.skip_tags()
    r.i32()                               # throttle
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    return corr, err, pid, epoch


def describe_producers_request(correlation_id, topics):
    """DescribeProducers v0 (flexible); topics: {name: [partitions]}."""
    body = uvarint(len(topics) + 1)
    for name, parts in topics.items():
        body += compact_string(name) + uvarint(len(parts) + 1)
        for p in parts:
            body += struct.pack(">i", p)
        body += uvarint(0)
    body += uvarint(0)
    return request(API_DESCRIBE_PRODUCERS, 0, correlation_id, body,
                   flexible=True)


def parse_describe_producers(body):
    """Returns (correlation_id, {(topic, partition): (error, [producer
    dicts with producer_id, producer_epoch, last_sequence, last_timestamp,
    coordinator_epoch, current_txn_start_offset])})."""
    r = Reader(body)
    corr = r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    out = {}
    for _ in range(r.uvarint() - 1):
        topic = r.compact_string()
        for _ in range(r.uvarint() - 1):
            part, err = r.i32(), r.i16()
            r.compact_string()            # error message
            producers = []
            for _ in range(r.uvarint() - 1):
                producers.append({
                    "producer_id": r.i64(),
                    "producer_epoch": r.i32(),
                    "last_sequence": r.i32(),
                    "last_timestamp": r.i64(),
                    "coordinator_epoch": r.i32(),
                    "current_txn_start_offset": r.i64(),
                })
                r.skip_tags()
            r.skip_tags()
            out[(topic, part)] = (err, producers)
        r.skip_tags()
    r.skip_tags()
    return corr, out


LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def list_offsets_request_v1(correlation_id, topic, partition,
                            timestamp=LATEST_TIMESTAMP):
    """ListOffsets v1 for one partition (-1 latest, -2 earliest)."""
    body = struct.pack(">i", -1)          # replica id: a consumer
    body += struct.pack(">i", 1) + string(topic)
    body += struct.pack(">iiq", 1, partition, timestamp)
    return request(API_LIST_OFFSETS, 1, correlation_id, body)


def parse_list_offsets_v1(body):
    """Returns (correlation_id, {(topic, partition): (error, offset)})."""
    r = Reader(body)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            part, err = r.i32(), r.i16()
            r.i64()                       # timestamp
            out[(topic, part)] = (err, r.i64())
    return corr, out


def fetch_request_v11(correlation_id, topic, partition, offset,
                      max_bytes=16 << 20, max_wait_ms=0):
    """Fetch v11 (non-flexible, no session) for one partition."""
    body = struct.pack(">iiiibii", -1, max_wait_ms, 0, max_bytes, 0, 0, -1)
    body += struct.pack(">i", 1) + string(topic)
    body += struct.pack(">iiiqqi", 1, partition, -1, offset, -1, max_bytes)
    body += struct.pack(">i", 0)          # forgotten topics
    body += string("")                    # rack id
    return request(API_FETCH, 11, correlation_id, body)


def parse_batches(records):
    """Split a record set into batch v2 headers (dicts), checking each
    CRC32C; a partial trailing batch is ignored as Kafka allows."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        base_offset, batch_len = struct.unpack_from(">qi", records, pos)
        end = pos + 12 + batch_len
        if end > len(records):
            break
        (_, magic, crc, attrs, lod, base_ts, max_ts, pid, epoch, base_seq,
         count) = struct.unpack_from(">ibIhiqqqhii", records, pos + 12)
        out.append({
            "base_offset": base_offset, "magic": magic,
            "crc_ok": crc32c(records[pos + 21:end]) == crc,
            "attributes": attrs, "last_offset_delta": lod,
            "base_timestamp": base_ts, "max_timestamp": max_ts,
            "producer_id": pid, "producer_epoch": epoch,
            "base_sequence": base_seq, "count": count,
            "length": 12 + batch_len,
        })
        pos = end
    return out


def parse_fetch_v11(body):
    """Returns (correlation_id, error, {(topic, partition): (error,
    high_watermark, [batch header dicts])})."""
    r = Reader(body)
    corr = r.i32()
    r.i32()                               # throttle
    top_err = r.i16()
    r.i32()                               # session id
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            part, err, hw = r.i32(), r.i16(), r.i64()
            r.i64()                       # last stable offset
            r.i64()                       # log start offset
            for _ in range(max(r.i32(), 0)):
                r.i64()
                r.i64()
            r.i32()                       # preferred read replica
            n = r.i32()
            records = b""
            if n > 0:
                records = r.data[r.pos:r.pos + n]
                r.pos += n
            out[(topic, part)] = (err, hw, parse_batches(records))
    return corr, top_err, out


class Client:
    """One connection sending requests one at a time and parsing answers."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = connect(host, port, timeout)
        self.corr = 0

    def close(self):
        self.sock.close()

    def call(self, build, *args, **kw):
        self.corr += 1
        self.sock.sendall(build(self.corr, *args, **kw))
        body = recv_frame(self.sock)
        if body is None:
            raise ConnectionError("broker closed the connection")
        (corr,) = struct.unpack_from(">i", body)
        if corr != self.corr:
            raise ValueError("correlation id %d, expected %d"
                             % (corr, self.corr))
        return body

    def produce(self, topic, partition, records, **kw):
        """(error, base_offset) of one partition's answer."""
        try:
            body = self.call(produce_request_v8, topic, partition, records,
                             **kw)
        except socket.timeout:
            raise AssertionError("no answer to Produce (acks=%s) within %ss"
                                 % (kw.get("acks", -1),
                                    self.sock.gettimeout()))
        _, parts = parse_produce_v8(body)
        assert len(parts) == 1, parts
        return parts[0][2], parts[0][3]

    def txn_offset_commit(self, transactional_id, group, producer_id,
                          producer_epoch, offsets, version=5):
        """TxnOffsetCommit v3+: {(topic, partition): error}."""
        return parse_txn_offset_commit_flex(self.call(
            txn_offset_commit_request_flex, transactional_id, group,
            producer_id, producer_epoch, offsets, version))

    def init_producer_id(self, version=4, **kw):
        """(error, producer_id, epoch)."""
        body = self.call(init_producer_id_request, version=version, **kw)
        return parse_init_producer_id(body, version)[1:]

    def describe_producers(self, topic, partitions):
        """{partition: (error, [producer dicts])}."""
        _, out = parse_describe_producers(
            self.call(describe_producers_request, {topic: partitions}))
        return {p: v for (t, p), v in out.items() if t == topic}

    def list_offset(self, topic, partition, timestamp=LATEST_TIMESTAMP):
        _, out = parse_list_offsets_v1(self.call(
            list_offsets_request_v1, topic, partition, timestamp))
        err, off = out[(topic, partition)]
        if err:
            raise ValueError("ListOffsets error %d" % err)
        return off

    def fetch_batches(self, topic, partition, offset=0):
        """All batch headers of a partition from offset to the high
        watermark, following up until everything is read."""
        batches = []
        while True:
            _, top_err, out = parse_fetch_v11(self.call(
                fetch_request_v11, topic, partition, offset))
            err, hw, got = out[(topic, partition)]
            if top_err or err:
                raise ValueError("Fetch error %d/%d" % (top_err, err))
            got = [b for b in got
                   if b["base_offset"] + b["last_offset_delta"] >= offset]
            batches += got
            if not got:
                return batches
            offset = got[-1]["base_offset"] + got[-1]["last_offset_delta"] + 1
            if offset >= hw:
                return batches


# ---------------------------------------------------------------------------
# Transaction helpers: FindCoordinator, InitProducerId with a transactional
# id, AddPartitionsToTxn, EndTxn, DescribeTransactions, ListTransactions,
# Metadata v1 parsing and Fetch with the records of uncompressed batches
# (control markers).

API_FIND_COORDINATOR = 10
API_ADD_PARTITIONS_TO_TXN = 24
API_END_TXN = 26
API_DESCRIBE_TRANSACTIONS = 65
API_LIST_TRANSACTIONS = 66

UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
INVALID_REQUEST = 42
PRODUCER_FENCED = 90

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def find_coordinator_request(correlation_id, key, key_type=1, version=1):
    """FindCoordinator v0..v6 for one key (v4+ sends it in the key list)."""
    flexible = version >= 3
    if version >= 4:
        body = struct.pack(">b", key_type)
        body += uvarint(2) + compact_string(key)
    else:
        body = compact_string(key) if flexible else string(key)
        if version >= 1:
            body += struct.pack(">b", key_type)
    if flexible:
        body += uvarint(0)
    return request(API_FIND_COORDINATOR, version, correlation_id, body,
                   flexible=flexible)


def parse_find_coordinator(body, version):
    """Returns (correlation_id, [dicts with key, node_id, host, port, error,
    message]); below v4 there is one entry with key None."""
    r = Reader(body)
    corr = r.i32()
    flexible = version >= 3
    if flexible:
        r.skip_tags()
    if version >= 1:
        r.i32()                           # throttle
    s = r.compact_string if flexible else r.string
    out = []
    if version >= 4:
        for _ in range(r.uvarint() - 1):
            key = s()
            node, host, port = r.i32(), s(), r.i32()
            err, msg = r.i16(), s()
            r.skip_tags()
            out.append({"key": key, "node_id": node, "host": host,
                        "port": port, "error": err, "message": msg})
    else:
        err = r.i16()
        msg = s() if version >= 1 else None
        node, host, port = r.i32(), s(), r.i32()
        out.append({"key": None, "node_id": node, "host": host,
                    "port": port, "error": err, "message": msg})
    return corr, out


def add_partitions_to_txn_request(correlation_id, transactional_id,
                                  producer_id, producer_epoch, topics,
                                  version=1):
    """AddPartitionsToTxn v0..v3; topics: {name: [partitions]} (or a list
    of (name, [partitions]) pairs to keep an order)."""
    flexible = version >= 3
    items = list(topics.items()) if isinstance(topics, dict) else topics
    if flexible:
        body = compact_string(transactional_id)
        body += struct.pack(">qh", producer_id, producer_epoch)
        body += uvarint(len(items) + 1)
        for name, parts in items:
            body += compact_string(name) + uvarint(len(parts) + 1)
            body += b"".join(struct.pack(">i", p) for p in parts)
            body += uvarint(0)
        body += uvarint(0)
    else:
        body = string(transactional_id)
        body += struct.pack(">qh", producer_id, producer_epoch)
        body += struct.pack(">i", len(items))
        for name, parts in items:
            body += string(name) + struct.pack(">i", len(parts))
            body += b"".join(struct.pack(">i", p) for p in parts)
    return request(API_ADD_PARTITIONS_TO_TXN, version, correlation_id, body,
                   flexible=flexible)


def parse_add_partitions_to_txn(body, version):
    """Returns (correlation_id, {(topic, partition): error})."""
    r = Reader(body)
    corr = r.i32()
    flexible = version >= 3
    if flexible:
        r.skip_tags()
    r.i32()                               # throttle
    s = r.compact_string if flexible else r.string
    n = r.uvarint() - 1 if flexible else r.i32()
    out = {}
    for _ in range(max(n, 0)):
        topic = s()
        m = r.uvarint() - 1 if flexible else r.i32()
        for _ in range(max(m, 0)):
            part, err = r.i32(), r.i16()
            if flexible:
                r.skip_tags()
            out[(topic, part)] = err
        if flexible:
            r.skip_tags()
    return corr, out


def end_txn_request(correlation_id, transactional_id, producer_id,
                    producer_epoch, committed, version=1):
    """EndTxn v0..v4 (flexible from v3)."""
    flexible = version >= 3
    body = compact_string(transactional_id) if flexible \
        else string(transactional_id)
    body += struct.pack(">qhb", producer_id, producer_epoch,
                        1 if committed else 0)
    if flexible:
        body += uvarint(0)
    return request(API_END_TXN, version, correlation_id, body,
                   flexible=flexible)


def parse_end_txn(body, version):
    """Returns (correlation_id, error)."""
    r = Reader(body)
    corr = r.i32()
    if version >= 3:
        r.skip_tags()
    r.i32()                               # throttle
    return corr, r.i16()


def describe_transactions_request(correlation_id, transactional_ids):
    """DescribeTransactions v0 (flexible)."""
    body = uvarint(len(transactional_ids) + 1)
    body += b"".join(compact_string(t) for t in transactional_ids)
    body += uvarint(0)
    return request(API_DESCRIBE_TRANSACTIONS, 0, correlation_id, body,
                   flexible=True)


def parse_describe_transactions(body):
    """Returns (correlation_id, {transactional_id: dict with error, state,
    timeout_ms, start_time_ms, producer_id, producer_epoch, topics
    ({topic: [partitions]})})."""
    r = Reader(body)
    corr = r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    out = {}
    for _ in range(r.uvarint() - 1):
        err = r.i16()
        tid = r.compact_string()
        d = {"error": err, "state": r.compact_string(), "timeout_ms": r.i32(),
             "start_time_ms": r.i64(), "producer_id": r.i64(),
             "producer_epoch": r.i16(), "topics": {}}
        for _ in range(r.uvarint() - 1):
            topic = r.compact_string()
            d["topics"][topic] = [r.i32() for _ in range(r.uvarint() - 1)]
            r.skip_tags()
        r.skip_tags()
        out[tid] = d
    r.skip_tags()
    return corr, out


def list_transactions_request(correlation_id, states=(), producer_ids=(),
                              version=0, duration_ms=-1):
    """ListTransactions v0..v1 (flexible)."""
    body = uvarint(len(states) + 1)
    body += b"".join(compact_string(s) for s in states)
    body += uvarint(len(producer_ids) + 1)
    body += b"".join(struct.pack(">q", p) for p in producer_ids)
    if version >= 1:
        body += struct.pack(">q", duration_ms)
    body += uvarint(0)
    return request(API_LIST_TRANSACTIONS, version, correlation_id, body,
                   flexible=True)


def parse_list_transactions(body):
    """Returns (correlation_id, error, [unknown filters], {transactional_id:
    (producer_id, state)})."""
    r = Reader(body)
    corr = r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    err = r.i16()
    unknown = [r.compact_string() for _ in range(r.uvarint() - 1)]
    out = {}
    for _ in range(r.uvarint() - 1):
        tid = r.compact_string()
        out[tid] = (r.i64(), r.compact_string())
        r.skip_tags()
    r.skip_tags()
    return corr, err, unknown, out


def parse_metadata_v1(body):
    """Returns (correlation_id, {node_id: (host, port)}, controller_id,
    {topic: dict with error, internal, partitions ({index: (error,
    leader)})})."""
    r = Reader(body)
    corr = r.i32()
    brokers = {}
    for _ in range(r.i32()):
        node, host, port = r.i32(), r.string(), r.i32()
        r.string()                        # rack
        brokers[node] = (host, port)
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err, name, internal = r.i16(), r.string(), r.i8()
        parts = {}
        for _ in range(r.i32()):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            for _ in range(2):            # replicas, isr
                for _ in range(max(r.i32(), 0)):
                    r.i32()
            parts[idx] = (perr, leader)
        topics[name] = {"error": err, "internal": bool(internal),
                        "partitions": parts}
    return corr, brokers, controller, topics


def _varint_at(data, pos):
    """(zigzag-decoded value, new position)."""
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def parse_records(batch_bytes):
    """The records of one uncompressed batch v2 (whole batch bytes from
    base offset on): [(offset_delta, key, value)]."""
    (count,) = struct.unpack_from(">i", batch_bytes, 57)
    pos = 61
    out = []
    for _ in range(count):
        length, pos = _varint_at(batch_bytes, pos)
        end = pos + length
        pos += 1                          # record attributes
        _, pos = _varint_at(batch_bytes, pos)     # timestamp delta
        delta, pos = _varint_at(batch_bytes, pos)
        parts = []
        for _ in range(2):
            n, pos = _varint_at(batch_bytes, pos)
            if n < 0:
                parts.append(None)
            else:
                parts.append(bytes(batch_bytes[pos:pos + n]))
                pos += n
        out.append((delta, parts[0], parts[1]))
        pos = end
    return out


def parse_batches_with_records(records):
    """parse_batches, plus for uncompressed batches "records" (see
    parse_records) and for control batches "control" = (type, coordinator
    epoch) from the first record (type 0 abort, 1 commit)."""
    out = parse_batches(records)
    pos = 0
    for b in out:
        (batch_len,) = struct.unpack_from(">i", records, pos + 8)
        raw = records[pos:pos + 12 + batch_len]
        pos += 12 + batch_len
        b["records"] = None
        b["control"] = None
        if b["attributes"] & 0x07 == 0:
            b["records"] = parse_records(raw)
        if b["attributes"] & ATTR_CONTROL and b["records"]:
            _, key, value = b["records"][0]
            ctype = coord_epoch = None
            if key is not None and len(key) >= 4:
                _, ctype = struct.unpack_from(">hh", key)
            if value is not None and len(value) >= 6:
                _, coord_epoch = struct.unpack_from(">hi", value)
            b["control"] = (ctype, coord_epoch)
    return out


def parse_fetch_v11_raw(body):
    """Like parse_fetch_v11 but the third item per partition is the raw
    record set bytes."""
    r = Reader(body)
    corr = r.i32()
    r.i32()                               # throttle
    top_err = r.i16()
    r.i32()                               # session id
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            part, err, hw = r.i32(), r.i16(), r.i64()
            r.i64()                       # last stable offset
            r.i64()                       # log start offset
            for _ in range(max(r.i32(), 0)):
                r.i64()
                r.i64()
            r.i32()                       # preferred read replica
            n = r.i32()
            records = b""
            if n > 0:
                records = r.data[r.pos:r.pos + n]
                r.pos += n
            out[(topic, part)] = (err, hw, records)
    return corr, top_err, out


class TxnClient(Client):
    """Client with the transaction APIs."""

    def api_versions(self):
        """{api_key: (min, max)} from ApiVersions v3."""
        _, err, apis = parse_api_versions(self.call(api_versions_request),
                                          3)
        if err:
            raise ValueError("ApiVersions error %d" % err)
        return apis

    def metadata(self, topics=None):
        """(brokers, controller, topics) of parse_metadata_v1."""
        return parse_metadata_v1(self.call(metadata_request_v1, topics))[1:]

    def find_coordinator(self, key, key_type=1, version=1):
        """The entries of parse_find_coordinator."""
        return parse_find_coordinator(self.call(
            find_coordinator_request, key, key_type, version), version)[1]

    def add_partitions(self, transactional_id, producer_id, producer_epoch,
                       topics, version=1):
        """{(topic, partition): error}."""
        return parse_add_partitions_to_txn(self.call(
            add_partitions_to_txn_request, transactional_id, producer_id,
            producer_epoch, topics, version), version)[1]

    def end_txn(self, transactional_id, producer_id, producer_epoch,
                committed, version=1):
        """The error code."""
        return parse_end_txn(self.call(
            end_txn_request, transactional_id, producer_id, producer_epoch,
            committed, version), version)[1]

    def describe_transactions(self, transactional_ids):
        return parse_describe_transactions(self.call(
            describe_transactions_request, transactional_ids))[1]

    def list_transactions(self, states=(), producer_ids=(), version=0):
        """(error, unknown filters, {transactional_id: (pid, state)})."""
        return parse_list_transactions(self.call(
            list_transactions_request, states, producer_ids, version))[1:]

    def fetch_full(self, topic, partition, offset=0):
        """All batches (parse_batches_with_records dicts) of a partition
        from offset to the high watermark."""
        batches = []
        while True:
            _, top_err, out = parse_fetch_v11_raw(self.call(
                fetch_request_v11, topic, partition, offset))
            err, hw, records = out[(topic, partition)]
            if top_err or err:
                raise ValueError("Fetch error %d/%d" % (top_err, err))
            got = [b for b in parse_batches_with_records(records)
                   if b["base_offset"] + b["last_offset_delta"] >= offset]
            batches += got
            if not got:
                return batches
            offset = got[-1]["base_offset"] + got[-1]["last_offset_delta"] + 1
            if offset >= hw:
                return batches


# ---------------------------------------------------------------------------
# Read path: Fetch v11 with an isolation level (last stable offset and the
# aborted transactions list) and ListOffsets v2 with an isolation level.

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def fetch_request_iso(correlation_id, topic, partition, offset,
                      isolation_level=READ_COMMITTED, max_wait_ms=0,
                      min_bytes=0, max_bytes=16 << 20):
    """Fetch v11 (no session) for one partition at an isolation level."""
    body = struct.pack(">iiiibii", -1, max_wait_ms, min_bytes, max_bytes,
                       isolation_level, 0, -1)
    body += struct.pack(">i", 1) + string(topic)
    body += struct.pack(">iiiqqi", 1, partition, -1, offset, -1, max_bytes)
    body += struct.pack(">i", 0)          # forgotten topics
    body += string("")                    # rack id
    return request(API_FETCH, 11, correlation_id, body)


def parse_fetch_iso(body):
    """Fetch v11 response: (correlation_id, top error, {(topic, partition):
    dict with error, high_watermark, last_stable_offset, log_start_offset,
    aborted ([(producer_id, first_offset)] or None when null), records
    (raw bytes) and batches (parse_batches_with_records)})."""
    r = Reader(body)
    corr = r.i32()
    r.i32()                               # throttle
    top_err = r.i16()
    r.i32()                               # session id
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            part, err, hw = r.i32(), r.i16(), r.i64()
            lso, log_start = r.i64(), r.i64()
            n = r.i32()
            aborted = None
            if n >= 0:
                aborted = [(r.i64(), r.i64()) for _ in range(n)]
            r.i32()                       # preferred read replica
            n = r.i32()
            records = b""
            if n > 0:
                records = r.data[r.pos:r.pos + n]
                r.pos += n
            out[(topic, part)] = {
                "error": err, "high_watermark": hw,
                "last_stable_offset": lso, "log_start_offset": log_start,
                "aborted": aborted, "records": records,
                "batches": parse_batches_with_records(records)}
    return corr, top_err, out


def list_offsets_request_v2(correlation_id, topic, partition,
                            timestamp=LATEST_TIMESTAMP,
                            isolation_level=READ_UNCOMMITTED):
    """ListOffsets v2 (first version with an isolation level)."""
    body = struct.pack(">ib", -1, isolation_level)
    body += struct.pack(">i", 1) + string(topic)
    body += struct.pack(">iiq", 1, partition, timestamp)
    return request(API_LIST_OFFSETS, 2, correlation_id, body)


def parse_list_offsets_v2(body):
    """Returns (correlation_id, {(topic, partition): (error, offset)})."""
    r = Reader(body)
    corr = r.i32()
    r.i32()                               # throttle
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            part, err = r.i32(), r.i16()
            r.i64()                       # timestamp
            out[(topic, part)] = (err, r.i64())
    return corr, out


# ---------------------------------------------------------------------------
# Consumer group APIs (classic protocol), non-flexible versions: JoinGroup
# v5, SyncGroup v3, Heartbeat v3, LeaveGroup v3, OffsetCommit v7,
# DeleteGroups v1; OffsetFetch v7 (flexible) for require_stable.

API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_JOIN_GROUP = 11
API_HEARTBEAT = 12
API_LEAVE_GROUP = 13
API_SYNC_GROUP = 14
API_DELETE_GROUPS = 42

ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
MEMBER_ID_REQUIRED = 79
UNSTABLE_OFFSET_COMMIT = 88


def consumer_subscription(topics):
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    body = struct.pack(">hi", 0, len(topics))
    body += b"".join(string(t) for t in topics)
    return body + struct.pack(">i", -1)


def consumer_assignment(parts):
    """ConsumerProtocolAssignment v0; parts: {topic: [partitions]}."""
    body = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        body += string(t) + struct.pack(">i", len(ps))
        body += b"".join(struct.pack(">i", p) for p in ps)
    return body + struct.pack(">i", -1)


def join_group_request_v5(correlation_id, group, member_id="",
                          session_timeout_ms=10000,
                          rebalance_timeout_ms=10000, instance_id=None,
                          topics=("t",), protocol="range"):
    body = string(group) + struct.pack(">ii", session_timeout_ms,
                                       rebalance_timeout_ms)
    body += string(member_id) + string(instance_id) + string("consumer")
    body += struct.pack(">i", 1) + string(protocol)
    body += bytes_field(consumer_subscription(list(topics)))
    return request(API_JOIN_GROUP, 5, correlation_id, body)


def parse_join_group_v5(body):
    """dict with error, generation, protocol, leader, member_id, members
    ([(member_id, instance_id, metadata)])."""
    r = Reader(body)
    r.i32()
    r.i32()                               # throttle
    d = {"error": r.i16(), "generation": r.i32(), "protocol": r.string(),
         "leader": r.string(), "member_id": r.string(), "members": []}
    for _ in range(max(r.i32(), 0)):
        mid, iid = r.string(), r.string()
        n = r.i32()
        meta = r.data[r.pos:r.pos + max(n, 0)]
        r.pos += max(n, 0)
        d["members"].append((mid, iid, meta))
    return d


def sync_group_request_v3(correlation_id, group, generation, member_id,
                          assignments=(), instance_id=None):
    """assignments: [(member_id, assignment bytes)]."""
    body = string(group) + struct.pack(">i", generation) + string(member_id)
    body += string(instance_id) + struct.pack(">i", len(assignments))
    for mid, a in assignments:
        body += string(mid) + bytes_field(a)
    return request(API_SYNC_GROUP, 3, correlation_id, body)


def parse_sync_group_v3(body):
    """(error, assignment bytes)."""
    r = Reader(body)
    r.i32()
    r.i32()                               # throttle
    err = r.i16()
    n = r.i32()
    return err, r.data[r.pos:r.pos + max(n, 0)]


def heartbeat_request_v3(correlation_id, group, generation, member_id,
                         instance_id=None):
    body = string(group) + struct.pack(">i", generation) + string(member_id)
    body += string(instance_id)
    return request(API_HEARTBEAT, 3, correlation_id, body)


def leave_group_request_v3(correlation_id, group, members):
    """members: [(member_id, instance_id)]."""
    body = string(group) + struct.pack(">i", len(members))
    for mid, iid in members:
        body += string(mid) + string(iid)
    return request(API_LEAVE_GROUP, 3, correlation_id, body)


def parse_error_after_throttle(body):
    """The INT16 error after correlation id and throttle (Heartbeat v3,
    LeaveGroup v3's top-level error)."""
    r = Reader(body)
    r.i32()
    r.i32()
    return r.i16()


def offset_commit_request_v7(correlation_id, group, offsets, generation=-1,
                             member_id="", instance_id=None):
    """offsets: {(topic, partition): offset}."""
    by_topic = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append((p, off))
    body = string(group) + struct.pack(">i", generation) + string(member_id)
    body += string(instance_id) + struct.pack(">i", len(by_topic))
    for t, parts in by_topic.items():
        body += string(t) + struct.pack(">i", len(parts))
        for p, off in parts:
            body += struct.pack(">iqi", p, off, -1) + string(None)
    return request(API_OFFSET_COMMIT, 7, correlation_id, body)


def parse_offset_commit_v7(body):
    """{(topic, partition): error}."""
    r = Reader(body)
    r.i32()
    r.i32()                               # throttle
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, err = r.i32(), r.i16()
            out[(t, p)] = err
    return out


def offset_fetch_request_v7(correlation_id, group, parts,
                            require_stable=False):
    """OffsetFetch v7 (flexible); parts: {topic: [partitions]}."""
    body = compact_string(group) + uvarint(len(parts) + 1)
    for t, ps in parts.items():
        body += compact_string(t) + uvarint(len(ps) + 1)
        body += b"".join(struct.pack(">i", p) for p in ps) + uvarint(0)
    body += struct.pack(">b", 1 if require_stable else 0) + uvarint(0)
    return request(API_OFFSET_FETCH, 7, correlation_id, body, flexible=True)


def parse_offset_fetch_v7(body):
    """(top-level error, {(topic, partition): (error, offset)})."""
    r = Reader(body)
    r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    out = {}
    for _ in range(r.uvarint() - 1):
        t = r.compact_string()
        for _ in range(r.uvarint() - 1):
            p, off = r.i32(), r.i64()
            r.i32()                       # leader epoch
            r.compact_string()            # metadata
            out[(t, p)] = (r.i16(), off)
            r.skip_tags()
        r.skip_tags()
    return r.i16(), out


def delete_groups_request_v1(correlation_id, groups):
    body = struct.pack(">i", len(groups)) + b"".join(string(g)
                                                     for g in groups)
    return request(API_DELETE_GROUPS, 1, correlation_id, body)


def parse_delete_groups_v1(body):
    """{group: error}."""
    r = Reader(body)
    r.i32()
    r.i32()                               # throttle
    return {r.string(): r.i16() for _ in range(r.i32())}


class ReadClient(TxnClient):
    """TxnClient plus isolation-level reads and the group APIs."""

    def fetch_iso(self, topic, partition, offset,
                  isolation_level=READ_COMMITTED, max_wait_ms=0,
                  min_bytes=0):
        """The partition's dict of parse_fetch_iso (top error folded into
        "top_error")."""
        _, top_err, out = parse_fetch_iso(self.call(
            fetch_request_iso, topic, partition, offset, isolation_level,
            max_wait_ms, min_bytes))
        d = out[(topic, partition)]
        d["top_error"] = top_err
        return d

    def list_offset_iso(self, topic, partition, isolation_level,
                        timestamp=LATEST_TIMESTAMP):
        """(error, offset)."""
        _, out = parse_list_offsets_v2(self.call(
            list_offsets_request_v2, topic, partition, timestamp,
            isolation_level))
        return out[(topic, partition)]

    def join_group(self, group, **kw):
        return parse_join_group_v5(self.call(join_group_request_v5, group,
                                             **kw))

    def sync_group(self, group, generation, member_id, assignments=(),
                   instance_id=None):
        return parse_sync_group_v3(self.call(
            sync_group_request_v3, group, generation, member_id,
            assignments, instance_id))

    def heartbeat(self, group, generation, member_id, instance_id=None):
        return parse_error_after_throttle(self.call(
            heartbeat_request_v3, group, generation, member_id,
            instance_id))

    def leave_group(self, group, members):
        return parse_error_after_throttle(self.call(
            leave_group_request_v3, group, members))

    def offset_commit(self, group, offsets, **kw):
        return parse_offset_commit_v7(self.call(
            offset_commit_request_v7, group, offsets, **kw))

    def offset_fetch(self, group, parts, require_stable=False):
        return parse_offset_fetch_v7(self.call(
            offset_fetch_request_v7, group, parts, require_stable))

    def delete_groups(self, groups):
        return parse_delete_groups_v1(self.call(delete_groups_request_v1,
                                                groups))


API_ADD_OFFSETS_TO_TXN = 25
API_TXN_OFFSET_COMMIT = 28
INVALID_GROUP_ID = 24


def add_offsets_to_txn_request_v1(correlation_id, transactional_id,
                                  producer_id, producer_epoch, group):
    body = string(transactional_id) + struct.pack(">qh", producer_id,
                                                  producer_epoch)
    body += string(group)
    return request(API_ADD_OFFSETS_TO_TXN, 1, correlation_id, body)


def txn_offset_commit_request_v2(correlation_id, transactional_id, group,
                                 producer_id, producer_epoch, offsets):
    """offsets: {(topic, partition): offset}."""
    by_topic = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append((p, off))
    body = string(transactional_id) + string(group)
    body += struct.pack(">qhi", producer_id, producer_epoch, len(by_topic))
    for t, parts in by_topic.items():
        body += string(t) + struct.pack(">i", len(parts))
        for p, off in parts:
            body += struct.pack(">iqi", p, off, -1) + string(None)
    return request(API_TXN_OFFSET_COMMIT, 2, correlation_id, body)


def add_offsets_to_txn(cli, transactional_id, producer_id, producer_epoch,
                       group):
    """AddOffsetsToTxn v1: the error code."""
    return parse_error_after_throttle(cli.call(
        add_offsets_to_txn_request_v1, transactional_id, producer_id,
        producer_epoch, group))


def txn_offset_commit(cli, transactional_id, group, producer_id,
                      producer_epoch, offsets):
    """TxnOffsetCommit v2: {(topic, partition): error}."""
    return parse_offset_commit_v7(cli.call(
        txn_offset_commit_request_v2, transactional_id, group, producer_id,
        producer_epoch, offsets))


# ---------------------------------------------------------------------------
# Transaction version 2 (KIP-890 part 2): ApiVersions features, EndTxn v5
# (producer id and epoch in the answer), AddPartitionsToTxn v4/v5 (the
# batched broker form with VerifyOnly) and Produce v9 (flexible).

FEATURE_TXN_VERSION = "transaction.version"


def parse_api_versions_features(body, version):
    """ApiVersions v3+ answer with its tagged fields: returns dict with
    error, apis ({key: (min, max)}), supported ({name: (min, max)}),
    finalized_epoch and finalized ({name: (min_level, max_level)})."""
    r = Reader(body)
    r.i32()                               # correlation id
    out = {"error": r.i16(), "apis": {}, "supported": {},
           "finalized_epoch": -1, "finalized": {}}
    for _ in range(max(r.uvarint() - 1, 0)):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        r.skip_tags()
        out["apis"][key] = (lo, hi)
    r.i32()                               # throttle
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0:
            for _ in range(r.uvarint() - 1):
                name = r.compact_string()
                out["supported"][name] = (r.i16(), r.i16())
                r.skip_tags()
        elif tag == 1:
            out["finalized_epoch"] = r.i64()
        elif tag == 2:
            for _ in range(r.uvarint() - 1):
                name = r.compact_string()
                hi, lo = r.i16(), r.i16()
                out["finalized"][name] = (lo, hi)
                r.skip_tags()
        r.pos = end
    return out


def parse_end_txn_v5(body):
    """EndTxn v5 answer: (correlation_id, error, producer_id, epoch)."""
    r = Reader(body)
    corr = r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    err = r.i16()
    pid, epoch = r.i64(), r.i16()
    return corr, err, pid, epoch


def add_partitions_to_txn_batched_request(correlation_id, transactions,
                                          version=4):
    """AddPartitionsToTxn v4/v5: transactions is a list of dicts with
    transactional_id, producer_id, producer_epoch, verify_only and
    topics ({name: [partitions]})."""
    body = uvarint(len(transactions) + 1)
    for t in transactions:
        body += compact_string(t["transactional_id"])
        body += struct.pack(">qhb", t["producer_id"], t["producer_epoch"],
                            1 if t.get("verify_only") else 0)
        topics = list(t["topics"].items())
        body += uvarint(len(topics) + 1)
        for name, parts in topics:
            body += compact_string(name) + uvarint(len(parts) + 1)
            body += b"".join(struct.pack(">i", p) for p in parts)
            body += uvarint(0)
        body += uvarint(0)
    body += uvarint(0)
    return request(API_ADD_PARTITIONS_TO_TXN, version, correlation_id, body,
                   flexible=True)


def parse_add_partitions_to_txn_batched(body):
    """v4/v5 answer: (correlation_id, error, {transactional_id:
    {(topic, partition): error}})."""
    r = Reader(body)
    corr = r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    err = r.i16()
    out = {}
    for _ in range(r.uvarint() - 1):
        tid = r.compact_string()
        res = out.setdefault(tid, {})
        for _ in range(r.uvarint() - 1):
            topic = r.compact_string()
            for _ in range(r.uvarint() - 1):
                part, perr = r.i32(), r.i16()
                r.skip_tags()
                res[(topic, part)] = perr
            r.skip_tags()
        r.skip_tags()
    return corr, err, out


class Tv2Client(TxnClient):
    """TxnClient with the transaction version 2 calls."""

    def api_versions_features(self, version=3):
        return parse_api_versions_features(
            self.call(api_versions_request, version), version)

    def end_txn_v5(self, transactional_id, producer_id, producer_epoch,
                   committed):
        """(error, producer_id, producer_epoch)."""
        return parse_end_txn_v5(self.call(
            end_txn_request, transactional_id, producer_id, producer_epoch,
            committed, 5))[1:]

    def add_partitions_batched(self, transactions, version=4):
        """(error, {transactional_id: {(topic, partition): error}})."""
        return parse_add_partitions_to_txn_batched(self.call(
            add_partitions_to_txn_batched_request, transactions,
            version))[1:]

    def fetch_committed(self, topic, partition, offset=0):
        """The parse_fetch_iso entry of a read_committed fetch."""
        return parse_fetch_iso(self.call(
            fetch_request_iso, topic, partition, offset))[2][
                (topic, partition)]


def produce_request_v12(correlation_id, topic, partition, records, acks=-1,
                        timeout_ms=10000, transactional_id=None,
                        version=12):
    """Produce v9+ (flexible) for one topic, partition and record set; v12
    (Kafka 4.x) is what a transaction version 2 client sends."""
    body = compact_string(transactional_id)
    body += struct.pack(">hi", acks, timeout_ms)
    body += uvarint(2) + compact_string(topic)
    body += uvarint(2) + struct.pack(">i", partition)
    body += uvarint(len(records) + 1) + records
    body += uvarint(0) + uvarint(0) + uvarint(0)
    return request(API_PRODUCE, version, correlation_id, body, flexible=True)


def parse_produce_v12(body):
    """Returns (correlation_id, [(topic, partition, error, base_offset,
    log_start_offset, error_message)])."""
    r = Reader(body)
    corr = r.i32()
    r.skip_tags()
    out = []
    for _ in range(r.uvarint() - 1):
        topic = r.compact_string()
        for _ in range(r.uvarint() - 1):
            part, err, base = r.i32(), r.i16(), r.i64()
            r.i64()                       # log append time
            log_start = r.i64()
            for _ in range(max(r.uvarint() - 1, 0)):
                r.i32()
                r.compact_string()
                r.skip_tags()
            msg = r.compact_string()
            r.skip_tags()
            out.append((topic, part, err, base, log_start, msg))
        r.skip_tags()
    r.i32()                               # throttle
    return corr, out


def txn_offset_commit_request_flex(correlation_id, transactional_id,
                                   group, producer_id, producer_epoch,
                                   offsets, version=5):
    """TxnOffsetCommit v3+ (flexible; v5 is what a transaction version 2
    client sends, with no AddOffsetsToTxn before it); offsets:
    {(topic, partition): offset}."""
    by_topic = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append((p, off))
    body = compact_string(transactional_id) + compact_string(group)
    body += struct.pack(">qhi", producer_id, producer_epoch, -1)
    body += compact_string("") + compact_string(None)
    body += uvarint(len(by_topic) + 1)
    for t, parts in by_topic.items():
        body += compact_string(t) + uvarint(len(parts) + 1)
        for p, off in parts:
            body += struct.pack(">iqi", p, off, -1) + compact_string(None)
            body += uvarint(0)
        body += uvarint(0)
    body += uvarint(0)
    return request(API_TXN_OFFSET_COMMIT, version, correlation_id, body,
                   flexible=True)


def parse_txn_offset_commit_flex(body):
    """{(topic, partition): error} of a TxnOffsetCommit v3+ answer."""
    r = Reader(body)
    r.i32()
    r.skip_tags()
    r.i32()                               # throttle
    out = {}
    for _ in range(r.uvarint() - 1):
        t = r.compact_string()
        for _ in range(r.uvarint() - 1):
            p = r.i32()
            out[(t, p)] = r.i16()
            r.skip_tags()
        r.skip_tags()
    return out


class Tv2ProduceClient(Tv2Client):
    """Tv2Client whose produce() speaks Produce v12 (v9+ with version)."""

    def produce(self, topic, partition, records, version=12, **kw):
        _, parts = parse_produce_v12(self.call(
            produce_request_v12, topic, partition, records, version=version,
            **kw))
        assert len(parts) == 1, parts
        return parts[0][2], parts[0][3]


# ---------------------------------------------------------------------------
# WriteTxnMarkers v0 (non-flexible): what a coordinator sends a partition
# leader, and what KIP-664's abort tool sends as an operator.

API_WRITE_TXN_MARKERS = 27
CLUSTER_AUTHORIZATION_FAILED = 31


def write_txn_markers_request(correlation_id, producer_id, producer_epoch,
                              commit, topics, coordinator_epoch=0):
    """One marker (commit True, abort False) for topics: {name: [parts]}."""
    body = struct.pack(">i", 1)
    body += struct.pack(">qhb", producer_id, producer_epoch,
                        1 if commit else 0)
    body += struct.pack(">i", len(topics))
    for name, parts in topics.items():
        body += string(name) + struct.pack(">i", len(parts))
        for p in parts:
            body += struct.pack(">i", p)
    body += struct.pack(">i", coordinator_epoch)
    return request(API_WRITE_TXN_MARKERS, 0, correlation_id, body)


def parse_write_txn_markers(body):
    """Returns (correlation_id, {(producer_id, topic, partition): error})."""
    r = Reader(body)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        pid = r.i64()
        for _ in range(r.i32()):
            topic = r.string()
            for _ in range(r.i32()):
                part, err = r.i32(), r.i16()
                out[(pid, topic, part)] = err
    return corr, out
