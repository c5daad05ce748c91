import os, subprocess, sys, tempfile
sys.path.insert(0, os.getcwd())
from grader import sandbox
code = ("import sys; sys.path.insert(0, 'tests'); import grader; dev = grader.setup(quiet=True); import kernels; "
        "grader.check('day1.vector_add', kernels.add); print('CHECK OK')")
for uid in (65534, 1000000123):
    home = tempfile.mkdtemp(dir="/tmp"); os.chmod(home, 0o700); os.chown(home, uid, uid)
    env = sandbox._kernel_env(__import__("pathlib").Path(home))
    p = subprocess.run([sys.executable, "-c", code], env=env, preexec_fn=sandbox._drop(uid), capture_output=True, text=True, cwd=os.getcwd())
    print("uid", uid, "rc", p.returncode, p.stdout[-300:], p.stderr[-1500:])
