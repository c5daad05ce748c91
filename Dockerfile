# The course on a CUDA GPU: JupyterLab for students, nbgrader for grading.
#   docker build -t gpu-course .
#   docker run --gpus all -p 8888:8888 gpu-course                  # JupyterLab
#   docker run --rm --gpus all --network none --read-only --tmpfs /tmp --tmpfs /root \
#          -e GRADER_IN_CONTAINER=1 -v $PWD/grading:/course/grading gpu-course \
#          course-grader autograde day1                             # grade untrusted submissions
# Dependencies are those of pyproject.toml (and environment.yml).
# A plain Python base: the torch wheel brings its own CUDA libraries (torch 2.13.0 from PyPI: CUDA 13,
# which needs an NVIDIA driver 580 or newer on the host; `course-grader doctor` says when it is older),
# and `--gpus all` brings the host's driver in. Triton compiles a small launcher with gcc at run time.
FROM python:3.12-slim-bookworm

RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev make \
    && rm -rf /var/lib/apt/lists/*
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH
RUN python3 -m venv $VIRTUAL_ENV

WORKDIR /course
COPY pyproject.toml README.md ./
COPY grader ./grader
# psycopg2: the driver for a PostgreSQL gradebook (NBGRADER_DB_URL), when several machines grade.
# Without rfc3987-syntax, which costs every Jupyter process over a second at import (Makefile).
RUN pip install --no-cache-dir torch==2.13.0 && pip install --no-cache-dir -e . psycopg2-binary \
    && pip uninstall -y rfc3987-syntax
COPY . .
# Reference answers, hidden tests, hidden cases and prediction formulas: the grader's alone (student
# kernels run as other users and import a copy of the grader without them).
RUN chmod -R go-rwx solutions grader/exercises

EXPOSE 8888
# JupyterLab as students get it (no instructor tools: grader/jupyter_student).
ENV JUPYTER_CONFIG_PATH=/course/grader/jupyter_student
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--allow-root", "--notebook-dir=/course"]
