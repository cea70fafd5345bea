"""A tiny AgentRunner in Python, stdlib only (AgentRunner Protocol v1 over OAR's NDJSON wire; docs/runners.md).

Frames, one JSON object per line, both ways:
  {"id", "method", "params"}  a request     {"id", "kind": "continue" | "end", "data"}  its stream and end
  {"id", "kind": "error", "error"}          {"id", "kind": "cancel"}                    {"part", "data", "last"}
The entities (manifest, context, results, API requests) follow packages/runner-sdk/schemas/*.schema.json.
"""
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

MAX_FRAME = 1024 * 1024  # the longest line either side sends
MAX_IN_FLIGHT = 128  # requests in flight to the host at once

MANIFEST = {
    "id": "plugin:oar/python-echo/echo",
    "name": "echo",
    "label": {"en_US": "Python echo"},
    "description": {"en_US": "Answers with the session model, or echoes the input when no model is granted."},
    "capabilities": {"streaming": True, "interrupt": True},
    "permissions": {"models": ["invoke"]},
    "context": {"ownership": "self_managed", "bootstrap": "current_event"},
    "config_schema": [{"name": "mode", "type": "string"}],
}


class Wire:
    def __init__(self):
        self.lock = threading.Lock()
        self.pending = {}  # request id -> [event, frame]
        self.cancels = {}  # host request id -> threading.Event
        self.parts = {}
        self.counter = 0
        self.slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)

    def send(self, frame):
        line = json.dumps(frame, ensure_ascii=False)
        lines = [line]
        if len(line.encode()) > MAX_FRAME:
            with self.lock:
                self.counter += 1
                part = f"py-p{self.counter}"
            size = MAX_FRAME // 8
            lines = [
                json.dumps({"part": part, "data": line[i : i + size], "last": i + size >= len(line)}, ensure_ascii=False)
                for i in range(0, len(line), size)
            ]
        with self.lock:
            for one in lines:
                sys.stdout.write(one + "\n")
            sys.stdout.flush()

    def request(self, method, params):
        """A request to the host, waiting for its end (at most MAX_IN_FLIGHT at once)."""
        with self.slots:
            with self.lock:
                self.counter += 1
                rid = f"py-{self.counter}"
                waiter = [threading.Event(), None]
                self.pending[rid] = waiter
            self.send({"id": rid, "method": method, "params": params})
            waiter[0].wait()
            frame = waiter[1]
        if frame.get("kind") == "error":
            raise ApiError(frame["error"])
        return frame.get("data")

    def receive(self, frame):
        if "part" in frame:
            sofar = self.parts.get(frame["part"], "") + frame["data"]
            if not frame["last"]:
                self.parts[frame["part"]] = sofar
                return
            self.parts.pop(frame["part"], None)
            frame = json.loads(sofar)
        if "method" in frame:
            threading.Thread(target=self.handle, args=(frame,), daemon=True).start()
        elif frame.get("kind") == "cancel":
            event = self.cancels.get(frame["id"])
            if event:
                event.set()
        elif frame.get("id") in self.pending:
            waiter = self.pending.pop(frame["id"])
            waiter[1] = frame
            waiter[0].set()

    def handle(self, frame):
        rid, method, params = frame["id"], frame["method"], frame.get("params") or {}
        try:
            if method == "LIST_AGENT_RUNNERS":
                self.send({"id": rid, "kind": "end", "data": {"runners": [MANIFEST]}})
            elif method == "RUN_AGENT":
                self.cancels[rid] = threading.Event()
                Run(self, rid, params["context"]).run()
                self.send({"id": rid, "kind": "end", "data": None})
            elif method == "CANCEL_AGENT_RUN":
                for event in self.cancels.values():
                    event.set()
                self.send({"id": rid, "kind": "end", "data": {"cancelled": True}})
            else:
                raise ApiError({"code": "not_found", "message": f"unknown method {method}"})
        except ApiError as error:
            self.send({"id": rid, "kind": "error", "error": error.error})


class ApiError(Exception):
    def __init__(self, error):
        super().__init__(error.get("message", ""))
        self.error = {"code": error.get("code", "runtime_error"), "message": error.get("message", ""),
                      "retryable": bool(error.get("retryable")), "details": error.get("details") or {}}


class Run:
    def __init__(self, wire, rid, ctx):
        self.wire, self.rid, self.ctx, self.sequence = wire, rid, ctx, 0
        self.cancelled = wire.cancels[rid]

    def emit(self, type_, data):
        result = {"run_id": self.ctx["run_id"], "type": type_, "data": data, "sequence": self.sequence}
        self.sequence += 1
        self.wire.send({"id": self.rid, "kind": "continue", "data": result})

    def api(self, action, payload):
        return self.wire.request("AGENT_API", {"run_id": self.ctx["run_id"], "action": action, "payload": payload})

    def answer(self, text):
        self.emit("message.completed", {"message": {"role": "assistant", "content": text}})

    def run(self):
        try:
            mode = (self.ctx.get("config") or {}).get("mode")
            if mode == "stream":
                for i in range(50):
                    self.emit("message.delta", {"chunk": {"role": "assistant", "content": f"{i},"}})
            elif mode == "big":
                echoed = self.api("echo", {"blob": "é" * 1_200_000})
                self.answer(str(len(echoed["blob"])))
            elif mode == "parallel":
                with ThreadPoolExecutor(max_workers=300) as pool:
                    answers = list(pool.map(lambda i: self.api("echo", {"i": i}), range(300)))
                self.answer(str(len(answers)))
            elif mode == "wait_cancel":
                self.cancelled.wait()
                self.emit("run.failed", {"code": "cancelled", "message": "cancelled by the host"})
                return
            else:
                text = (self.ctx.get("input") or {}).get("text") or ""
                models = (self.ctx.get("resources") or {}).get("models") or []
                if models:
                    result = self.api("models.invoke", {"model_id": models[0]["model_id"],
                                                        "messages": [{"role": "user", "content": text}]})
                    self.answer(result["message"]["content"])
                else:
                    self.answer(f"echo: {text}")
            self.emit("run.completed", {})
        except ApiError as error:
            self.emit("run.failed", {"code": "runner.error", "message": f"{error.error['code']}: {error}"})


def main():
    wire = Wire()
    for line in sys.stdin:  # ends when the host closes stdin (it ended the run, or it died)
        line = line.strip()
        if line:
            wire.receive(json.loads(line))


if __name__ == "__main__":
    main()
