"""An OTLP/HTTP receiver for tests/watch_otlp.rs and tests/watch_profiles.rs:
listens on a free loopback port (printed first), decodes each POST to
/v1/metrics, /v1/logs or /v1development/profiles with the real message
types of PyPI's opentelemetry-proto, refuses (400) a body with a wrong
Content-Type, that does not parse, or that has a field the types do not
know (a wrong field number would hide there), and a profiles request
without the development version its types are
(OTLP-Profiles-Development-Version: 1), answers 200 with the
Export*ServiceResponse, and prints each request as one JSON line."""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf.json_format import MessageToDict
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2

KINDS = {
    "/v1/metrics": (
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
    "/v1/logs": (
        logs_service_pb2.ExportLogsServiceRequest,
        logs_service_pb2.ExportLogsServiceResponse,
    ),
    "/v1development/profiles": (
        profiles_service_pb2.ExportProfilesServiceRequest,
        profiles_service_pb2.ExportProfilesServiceResponse,
    ),
}


def unknown_fields(msg, where):
    """Paths of the fields in msg and below that its type does not know."""
    found = [f"{where}#{f.field_number}" for f in UnknownFieldSet(msg)]
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        repeated = (
            field.is_repeated
            if hasattr(field, "is_repeated")
            else field.label == field.LABEL_REPEATED
        )
        values = value if repeated else [value]
        for i, v in enumerate(values):
            if hasattr(v, "ListFields"):
                found += unknown_fields(v, f"{where}.{field.name}[{i}]")
    return found


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        kind = KINDS.get(self.path)
        problem = None
        if kind is None:
            problem = f"no such path {self.path}"
        elif self.headers.get("Content-Type") != "application/x-protobuf":
            problem = f"Content-Type {self.headers.get('Content-Type')}"
        elif "profiles" in self.path and self.headers.get_all(
            "OTLP-Profiles-Development-Version"
        ) != ["1"]:
            problem = "no OTLP-Profiles-Development-Version: 1"
        else:
            request = kind[0]()
            try:
                request.ParseFromString(body)
            except Exception as e:  # a DecodeError, or worse
                problem = f"does not parse: {e}"
            else:
                unknown = unknown_fields(request, kind[0].__name__)
                if unknown:
                    problem = f"unknown fields {unknown}"
        if problem:
            print(json.dumps({"path": self.path, "error": problem}), flush=True)
            self.send_response(400)
            self.end_headers()
            return
        line = {
            "path": self.path,
            "request": MessageToDict(request, preserving_proto_field_name=True),
        }
        print(json.dumps(line), flush=True)
        answer = kind[1]().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.flush()
server.serve_forever()
