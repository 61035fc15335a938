"""How long a burst of streaming requests takes to get through an HTTP server's front door.

A closed-loop benchmark starts with every client sending at once, and each request spends
some CPU time in the client and in the API server before the engine can see it (HTTP, the
JSON body, request validation). Where those run on one event loop each, a burst of C
requests reaches the engine spread out over C times that time. This script measures it on
the machine it runs on, without a GPU or an engine:

- a server process (uvicorn with httptools and uvloop, FastAPI, as vLLM's API server is
  built) whose `/v1/completions` handler validates the body with vLLM's own
  `CompletionRequest` model when vLLM is importable (else a plain JSON parse, said in the
  output) and streams one SSE chunk back at once, then `[DONE]`;
- a client modelled on the benchmark harnesses' request function (aiohttp, a session per
  request unless `--shared-session`, the completions payload with a text prompt, the time
  to the first chunk with text taken as TTFT).

For each burst size it prints the mean and median time to that first chunk over
`--repeats` bursts and the slope of that median against the burst size: twice that slope
is the serial time per request (a burst of C spread evenly over C x s has a mean of about
(C - 1) s / 2 above a lone request's). Not measured here: the prompt's tokenising (its own
term, `frontend_us_per_token`), vLLM's input processing and the hop to the engine process.

Needs `fastapi`, `uvicorn[standard]` and `aiohttp` (not project dependencies), and for
vLLM's request model a vLLM wheel installed with `--no-deps` plus the modules its protocol
imports (no GPU needed). That model logs a warning for each request, since the harness's
payload sends `best_of`, which vLLM 0.13's server logs too: part of the measured path.

    python benchmarks/api_server_burst.py --bursts 1,8,32,64,128 --prompt-words 700 2>&1 | grep -v WARNING
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

SERVER_SOURCE = r'''
import json, sys
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
try:
    from vllm.entrypoints.openai.protocol import CompletionRequest
except Exception:  # vLLM not importable: plain JSON
    CompletionRequest = None
app = FastAPI()

@app.get("/model")
async def model():
    return {"validator": "vllm CompletionRequest" if CompletionRequest else "json.loads"}

@app.post("/v1/completions")
async def completions(request: Request):
    body = await request.body()
    if CompletionRequest is not None:
        req = CompletionRequest.model_validate_json(body)
        model = req.model
    else:
        model = json.loads(body)["model"]
    chunk = json.dumps({"id": "cmpl-0", "object": "text_completion", "created": 0, "model": model,
                        "choices": [{"index": 0, "text": " a", "logprobs": None, "finish_reason": None}]})
    async def stream():
        yield f"data: {chunk}\n\n"
        yield "data: [DONE]\n\n"
    return StreamingResponse(stream(), media_type="text/event-stream")

if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error",
                loop="uvloop", http="httptools")
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _one(url: str, payload: dict, session) -> float:
    """The harness's request function, reduced to the time to the first chunk with text."""
    import aiohttp

    own = session is None
    if own:
        session = aiohttp.ClientSession(trust_env=True, timeout=aiohttp.ClientTimeout(total=600))
    try:
        st = time.perf_counter()
        async with session.post(url=url, json=payload, headers={"Authorization": "Bearer x"}) as response:
            async for chunk_bytes in response.content:
                chunk_bytes = chunk_bytes.strip()
                if not chunk_bytes:
                    continue
                chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                if chunk == "[DONE]":
                    break
                if json.loads(chunk).get("choices"):
                    return time.perf_counter() - st
        raise RuntimeError("no chunk with text came back")
    finally:
        if own:
            await session.close()


async def _bursts(url: str, sizes: list[int], repeats: int, prompt: str, shared: bool) -> dict[int, list[float]]:
    import aiohttp
    payload = {"model": "m", "prompt": prompt, "temperature": 0.0, "best_of": 1, "max_tokens": 1024,
               "logprobs": None, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    results: dict[int, list[float]] = {c: [] for c in sizes}
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) if shared else None
    try:
        for _ in range(2):  # warm-up: first connections, imports on the server's first call
            await asyncio.gather(*(_one(url, payload, session) for _ in range(8)))
        for _ in range(repeats):
            for c in sizes:
                times = await asyncio.gather(*(_one(url, payload, session) for _ in range(c)))
                results[c].append(statistics.fmean(times) * 1e3)
                await asyncio.sleep(0.05)
    finally:
        if session is not None:
            await session.close()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", default="1,8,32,64,128", help="burst sizes (clients sending at once)")
    ap.add_argument("--repeats", type=int, default=5, help="bursts of each size")
    ap.add_argument("--prompt-words", type=int, default=700, help="words of random text in each prompt")
    ap.add_argument("--shared-session", action="store_true", help="one aiohttp session for all requests")
    args = ap.parse_args()
    try:
        import aiohttp  # noqa: F401
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        sys.exit(f"error: {exc.name} is not installed\n  fix: pip install fastapi 'uvicorn[standard]' aiohttp")
    sizes = sorted({int(x) for x in args.bursts.split(",")})
    rng = random.Random(0)
    prompt = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8)))
                      for _ in range(args.prompt_words))
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER_SOURCE, str(port)], env=os.environ.copy())
    try:
        import urllib.request
        for _ in range(300):
            try:
                validator = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/model"))["validator"]
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("error: the test server did not start within 30 s")
        results = asyncio.run(_bursts(f"http://127.0.0.1:{port}/v1/completions", sizes, args.repeats, prompt,
                                      args.shared_session))
    finally:
        server.terminate()
        server.wait()
    print(f"server: FastAPI + uvicorn (uvloop, httptools), body validated by {validator}; "
          f"client: aiohttp, {'one shared session' if args.shared_session else 'a session per request'}; "
          f"prompt {len(prompt):,} characters; {os.cpu_count()} CPUs")
    print(f"{'burst':>6} {'mean ms':>9} {'median of means':>16}")
    medians = {}
    for c in sizes:
        medians[c] = statistics.median(results[c])
        print(f"{c:>6} {statistics.fmean(results[c]):>9.2f} {medians[c]:>16.2f}")
    if len(sizes) > 1:
        slope = statistics.linear_regression(list(medians), list(medians.values())).slope
        print(f"slope {slope:.3f} ms per client in the burst: about {2 * slope:.2f} ms of serial time per request")


if __name__ == "__main__":
    main()
