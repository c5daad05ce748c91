"""`python -m grader.pipeline.nbgrader_process ARGS` is nbgrader's command line (`python -m nbgrader ARGS`) as the
batch starts it for each notebook, without two fixed costs that every notebook used to pay.

- jsonschema (which nbformat imports) also imports `rfc3987_syntax` when that package is installed
  (jsonschema[format-nongpl] brings it in). That module builds some thirty Lark parsers when it is
  imported: 1.3 to 1.9 s of CPU in every nbgrader process, all for the `iri` format check, which no
  notebook schema uses (upstream: python-jsonschema/jsonschema#1428). The import is optional in jsonschema,
  so it is kept out here.
- Once nbgrader has written the grades and the autograded notebook, the process ends at once
  (`os._exit`) instead of tearing down torch, the checker's warm-up thread and ZeroMQ, which took
  0.6 to 1 s. Logging is shut down and output flushed first, and the exit status is nbgrader's. The
  kernel has already been shut down by then (nbclient does that when the notebook ends), and the batch
  kills anything left behind, as before.
"""
from __future__ import annotations

import logging
import os
import sys
import traceback

# A None entry makes `import rfc3987_syntax` raise ImportError, which jsonschema handles.
sys.modules.setdefault("rfc3987_syntax", None)


def main() -> None:
    status = 1
    try:
        from nbgrader.apps.nbgraderapp import main as nbgrader_main
        sys.argv[0] = "nbgrader"
        nbgrader_main()
        status = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported as Python would report it, with the same status
        traceback.print_exc()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)


if __name__ == "__main__":
    main()
