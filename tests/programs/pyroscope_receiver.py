"""A Pyroscope push receiver for tests/watch_profiles.rs: listens on a
loopback port (given as the first argument, or a free one; printed first),
takes POST /push.v1.PusherService/Push as Connect's unary call with a
protobuf body, and decodes it field by field as grafana/pyroscope's
api/push/v1/push.proto defines it:

  PushRequest      { repeated RawProfileSeries series = 1; }
  RawProfileSeries { repeated types.v1.LabelPair labels = 1;
                     repeated RawSample samples = 2; }
  LabelPair        { string name = 1; string value = 2; }
  RawSample        { bytes raw_profile = 1; string ID = 2; }

and each raw_profile as gzip'd pprof (google/pprof's profile.proto:
sample_type = 1, sample = 2, function = 5, string_table = 6; Function:
name = 2; ValueType: type = 1, unit = 2). A field the definitions do not
have, a wrong wire type, a wrong Content-Type or a body that does not
gunzip or parse is refused (400). Each request is printed as one JSON line:
its series, each with its labels, the function names of its profile and
its sample types."""

import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Bad(Exception):
    pass


def varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise Bad("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(buf):
    """(field number, wire type, value) of a message: ints or bytes."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            n, i = varint(buf, i)
            if i + n > len(buf):
                raise Bad("truncated field")
            value, i = buf[i : i + n], i + n
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise Bad(f"wire type {wire}")
        yield number, wire, value


def strict(buf, message, known):
    """The fields of buf, each checked against known: number -> wire type."""
    out = []
    for number, wire, value in fields(buf):
        if known.get(number) != wire:
            raise Bad(f"{message} has no field {number} of wire type {wire}")
        out.append((number, value))
    return out


def pprof(raw):
    """The function names and sample types of a pprof Profile."""
    strings, functions, types = [], [], []
    for number, wire, value in fields(raw):
        if number == 6 and wire == 2:
            strings.append(value.decode())
        elif number == 5 and wire == 2:
            name = [v for n, w, v in fields(value) if n == 2 and w == 0]
            functions.append(name[0] if name else 0)
        elif number == 1 and wire == 2:
            vt = {n: v for n, w, v in fields(value) if w == 0}
            types.append((vt.get(1, 0), vt.get(2, 0)))
    if not strings or strings[0] != "":
        raise Bad("string_table[0] is not the empty string")
    return (
        [strings[f] for f in functions],
        [f"{strings[t]}/{strings[u]}" for t, u in types],
    )


def push_request(body):
    series = []
    for _, raw_series in strict(body, "PushRequest", {1: 2}):
        labels, profiles = {}, []
        for number, value in strict(raw_series, "RawProfileSeries", {1: 2, 2: 2, 3: 2}):
            if number == 1:
                pair = dict(strict(value, "LabelPair", {1: 2, 2: 2}))
                labels[pair.get(1, b"").decode()] = pair.get(2, b"").decode()
            elif number == 2:
                sample = dict(strict(value, "RawSample", {1: 2, 2: 2}))
                functions, types = pprof(gzip.decompress(sample.get(1, b"")))
                profiles.append({"functions": functions, "sample_types": types})
        series.append({"labels": labels, "profiles": profiles})
    return series


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        problem = None
        if self.path != "/push.v1.PusherService/Push":
            problem = f"no such path {self.path}"
        elif self.headers.get("Content-Type") != "application/proto":
            problem = f"Content-Type {self.headers.get('Content-Type')}"
        else:
            try:
                line = {"path": self.path, "bytes": len(body), "series": push_request(body)}
            except Exception as e:  # Bad, or gzip's or UTF-8's errors
                problem = f"does not decode: {e!r}"
        if problem:
            print(json.dumps({"path": self.path, "error": problem}), flush=True)
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        print(json.dumps(line), flush=True)
        # PushResponse {}: an empty message.
        self.send_response(200)
        self.send_header("Content-Type", "application/proto")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


HTTPServer.allow_reuse_address = True
server = HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
