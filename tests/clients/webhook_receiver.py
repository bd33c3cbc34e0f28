"""A webhook receiver for the end-to-end tests: verifies every delivery with the Python
`standardwebhooks` package (a verifier texfleet did not write) and answers as told, writing
one JSON line per request to the record file. Its port is printed on the first line of stdout.

    webhook_receiver.py RECORD SECRET_FILE BEHAVIOUR

BEHAVIOUR: ok (200), fail-3 (500 three times, then 200), redirect (302), hang (never
answers), hang-first (never answers the first request, then 200), endless (200 with a body
that never ends). The secret is read
from SECRET_FILE at each request (it is known only after the endpoint is registered).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

record_path, secret_path, behaviour = sys.argv[1:4]
lock = threading.Lock()
requests_seen = 0


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        global requests_seen
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        try:
            with open(secret_path) as handle:
                secret = handle.read().strip()
            Webhook(secret).verify(body, {k.lower(): v for k, v in self.headers.items()})
            verified = True
        except Exception as failure:  # recorded, never fatal: the test judges
            verified = f"{type(failure).__name__}: {failure}"
        with lock:
            requests_seen += 1
            number = requests_seen
            with open(record_path, "a") as record:
                record.write(json.dumps({
                    "at": time.time(),
                    "path": self.path,
                    "id": self.headers.get("webhook-id"),
                    "timestamp": self.headers.get("webhook-timestamp"),
                    "verified": verified,
                    "signature": self.headers.get("webhook-signature"),
                    "raw": body.decode(),
                    "body": json.loads(body) if body else None,
                }) + "\n")
        if behaviour == "hang" or (behaviour == "hang-first" and number == 1):
            time.sleep(3600)
        elif behaviour == "redirect":
            self.send_response(302)
            self.send_header("location", "/elsewhere")
            self.end_headers()
        elif behaviour == "fail-3" and number <= 3:
            self.send_response(500)
            self.end_headers()
        elif behaviour == "endless":
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"x" * 65536)
            except OSError:
                pass
        else:
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
