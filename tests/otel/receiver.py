"""A small OTLP/HTTP traces receiver for the tests: decodes each ExportTraceServiceRequest with
the opentelemetry-proto package's protobuf classes and appends every span, as one JSON line, to
the file named by argv[2]. argv[1] is a file it writes its port to once it listens (127.0.0.1, a
free port). Exits 3 when opentelemetry-proto is not installed, so the test can say so and skip.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

try:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
except ImportError:
    sys.exit(3)


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "int_value":
        return int(v.int_value)
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        with open(sys.argv[2], "a") as out:
            for rs in req.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.write(json.dumps({
                            "path": self.path,
                            "content_type": self.headers.get("content-type"),
                            "api_key": self.headers.get("x-api-key"),
                            "resource": resource,
                            "scope": ss.scope.name,
                            "schema_url": ss.schema_url,
                            "name": s.name,
                            "kind": s.kind,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex(),
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                            "status": s.status.code,
                            "attributes": attributes(s.attributes),
                        }) + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402

os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
