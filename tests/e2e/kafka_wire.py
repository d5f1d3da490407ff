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
