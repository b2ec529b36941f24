"""Task directories in the conventions real task sets use (Harbor, Terminal-Bench 1.x and 2),
written here for the import tests."""

from __future__ import annotations

from pathlib import Path

# Terminal-Bench 2's tests/test.sh, as 82 of its 89 tasks have it.
TB2_TEST_SH = """#!/bin/bash

# Install curl
apt-get update
apt-get install -y curl

# Install uv
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

# Check if we're in a valid working directory
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile @"
    exit 1
fi

uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA


if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
""".replace("@", "before running this script.")

BINARY = bytes(range(256)) * 8  # NUL bytes and every other value

REWARD = "if [ $? -eq 0 ]; then r=1; else r=0; fi\necho $r > /logs/verifier/reward.txt\n"

BOILERPLATE = (
    "#!/bin/bash\napt-get update\napt-get install -y curl\n"
    "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\nsource $HOME/.local/bin/env\n"
    'if [ "$PWD" = "/" ]; then echo "no WORKDIR"; exit 1; fi\n'
    "uv venv .tbench-testing\nsource .tbench-testing/bin/activate\n"
    "uv pip install pytest==8.4.1\nuv run pytest /tests/test_outputs.py -rA\n" + REWARD
)

PLAIN = "#!/bin/bash\ncd / && python3 -m pytest -rA /tests/test_outputs.py\n" + REWARD


def write(root: Path, rel: str, content: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def harbor(root: Path, *, dockerfile: str, test: str, solve: str, script=PLAIN, toml="") -> None:
    write(root, "instruction.md", f"Task {root.name}: do what the tests check.\n")
    write(root, "environment/Dockerfile", dockerfile)
    write(root, "tests/test.sh", script)
    write(root, "tests/test_outputs.py", test)
    write(root, "solution/solve.sh", "#!/bin/bash\n" + solve)
    if toml:
        write(root, "task.toml", toml)


def owner_test(path: str, uid: int, text: str) -> str:
    return (
        "import os\n\n\ndef test_written_by_the_agent():\n"
        f"    assert open({path!r}).read() == {text!r}\n"
        f"    assert os.stat({path!r}).st_uid == {uid}\n"
    )


TB_COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
      - GREETING=hello
    working_dir: /work
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
"""

TB_RUN_TESTS = (
    "#!/bin/bash\napt-get update\napt-get install -y curl\n"
    "curl -LsSf https://astral.sh/uv/install.sh | sh\nsource $HOME/.local/bin/env\n"
    "uv init\nuv add pytest==8.4.1\nuv run pytest $TEST_DIR/test_outputs.py -rA\n"
)

TOML = """version = "1.0"

[metadata]
author_name = "Conventions Test"
author_email = "tests@example.invalid"
difficulty = "easy"
category = "python_programming"
tags = ["python", "identity"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 600.0

[environment]
build_timeout_sec = 300.0
"""


def source_tasks(src: Path) -> None:
    harbor(  # EvoEval's shape: root in /app, a relative path, the uv boilerplate at grading
        src / "root_app",
        dockerfile="FROM ubuntu:22.04\nWORKDIR /app\n",
        test=owner_test("/app/solution.py", 0, "x = 41 + 1\n"),
        solve="echo 'x = 41 + 1' > solution.py\n",
        script=BOILERPLATE,
        toml=TOML,
    )
    harbor(  # Terminal-Bench 2's shape: root in /app, its test.sh verbatim (uvx -w ... --ctrf)
        src / "tb2_verbatim",
        dockerfile="FROM ubuntu:22.04\nWORKDIR /app\n",
        test=owner_test("/app/answer.txt", 0, "42\n"),
        solve="echo 42 > answer.txt\n",
        script=TB2_TEST_SH,
    )
    harbor(  # a reference solution that installs under /usr/local and configures /etc: an
        # honest root agent may do the same (the verifier allows what the reference changes)
        src / "root_installs",
        dockerfile="FROM ubuntu:22.04\nWORKDIR /app\n",
        test="import subprocess\n\n\ndef test_installed():\n"
        "    out = subprocess.run(['greet'], capture_output=True, text=True).stdout\n"
        "    assert out == open('/etc/greet.conf').read() == 'hello\\n'\n"
        "    import greetlib\n\n    assert greetlib.X == 1\n",
        solve="printf '#!/bin/sh\\necho hello\\n' > /usr/local/bin/greet\n"
        "chmod 755 /usr/local/bin/greet && echo hello > /etc/greet.conf\n"
        "d=/usr/local/lib/python3.11/dist-packages/greetlib\n"
        "mkdir -p $d && echo 'X = 1' > $d/__init__.py\n",
        script=BOILERPLATE,
    )
    harbor(
        src / "agent_user",
        dockerfile="FROM ubuntu:22.04\nRUN useradd -m -u 1600 worker\nWORKDIR /home/worker\n",
        test=owner_test("/home/worker/notes.txt", 1600, "noted\n"),
        solve="echo noted > notes.txt\n",
        toml='[agent]\nuser = "worker"\n',
    )
    harbor(
        src / "image_user",
        dockerfile="FROM ubuntu:22.04\nRUN useradd -m -u 1500 builder\nUSER builder\n"
        "WORKDIR /home/builder\n",
        test=owner_test("/home/builder/result.txt", 1500, "done\n"),
        solve="echo done > result.txt\n",
    )
    harbor(  # the image's ENV at grading; a support file the test finds through TEST_DIR
        src / "image_env",
        dockerfile="FROM ubuntu:22.04\nRUN mkdir -p /opt/tool/bin && printf '#!/bin/sh\\n"
        "echo tool-ok\\n' > /opt/tool/bin/mytool && chmod 755 /opt/tool/bin/mytool\n"
        "ENV PATH=/opt/tool/bin:$PATH TEST_DIR=/tests\nWORKDIR /app\n",
        test="import json, os, subprocess\n\n\ndef test_tool():\n"
        "    expected = json.load(open(os.environ['TEST_DIR'] + '/expected.json'))\n"
        "    assert open('/app/tool.out').read() == expected['out']\n"
        "    assert subprocess.run(['mytool'], capture_output=True, text=True).stdout == "
        "expected['out']\n",
        solve="mytool > tool.out\n",
    )
    write(src / "image_env", "tests/expected.json", '{"out": "tool-ok\\n"}')
    harbor(  # DevEval's shape: test.sh runs the checks (an executable of the image, like its
        # gradlew) and writes a log its pytest file reads
        src / "script_log",
        dockerfile="FROM ubuntu:22.04\nWORKDIR /app\nCOPY run-checks /app/run-checks\n",
        test="def test_log():\n    assert 'ALL_PASSED' in open('/app/check.log').read()\n",
        solve="printf 'double() { echo $(( $1 * 2 )); }\\n' > lib.sh\n",
        script="#!/bin/bash\nset -e\ncd /app\nif ./run-checks > /app/check.log 2>&1; then "
        "echo ALL_PASSED >> /app/check.log; fi\n" + PLAIN,
    )
    write(src / "script_log", "environment/run-checks", "#!/bin/sh\nbash /tests/checks.sh\n")
    (src / "script_log/environment/run-checks").chmod(0o755)
    write(src / "script_log", "tests/checks.sh", '. /app/lib.sh\n[ "$(double 21)" = 42 ]\n')
    harbor(  # binary files in the build context and in tests/
        src / "binary_files",
        dockerfile="FROM ubuntu:22.04\nWORKDIR /app\nCOPY data.bin /app/data.bin\n",
        test="import hashlib\n\n\ndef test_digest():\n"
        "    expected = hashlib.sha256(open('/tests/data.bin', 'rb').read()).hexdigest()\n"
        "    assert open('/app/digest.txt').read().split()[0] == expected\n",
        solve="sha256sum data.bin > digest.txt\n",
    )
    write(src / "binary_files", "environment/data.bin", BINARY)
    write(src / "binary_files", "tests/data.bin", BINARY)
    harbor(  # TB's python-3-13 images: floating-point sums as Python 3.13 does them
        src / "python_313",
        dockerfile="FROM python:3.13-slim\nWORKDIR /app\n",
        test="def test_sum():\n    assert open('/app/sum.txt').read().strip() == '1.0'\n",
        solve="python3 -c 'print(sum([1e16, 1.0, -1e16]))' > sum.txt\n",
    )
    tb = src / "tb_compose"
    write(
        tb,
        "task.yaml",
        "instruction: |-\n  Write $GREETING to greeting.txt.\n"
        "author_name: TB Test\ndifficulty: medium\ncategory: games\ntags: [tb]\n"
        "max_agent_timeout_sec: 300\nmax_test_timeout_sec: 90\n",
    )
    write(tb, "Dockerfile", "FROM ubuntu:22.04\n")
    write(tb, "docker-compose.yaml", TB_COMPOSE)
    write(tb, "run-tests.sh", TB_RUN_TESTS)
    write(tb, "solution.sh", '#!/bin/bash\necho "$GREETING" > greeting.txt\n')
    write(
        tb,
        "tests/test_outputs.py",
        "def test_greeting():\n    assert open('/work/greeting.txt').read() == 'hello\\n'\n",
    )
    # Rejected, with the cause.
    harbor(
        src / "zz_needs_network",
        dockerfile="FROM ubuntu:22.04\nWORKDIR /app\n",
        test="def test_x():\n    assert False\n",
        solve="true\n",
        script="#!/bin/bash\npip install endless-absent-package || exit 1\n" + PLAIN,
    )
    harbor(
        src / "zz_permission_denied",
        dockerfile="FROM ubuntu:22.04\nRUN useradd -m -u 1700 guest && mkdir /srv/locked\n"
        "USER guest\nWORKDIR /home/guest\n",
        test=owner_test("/srv/locked/out.txt", 1700, "x\n"),
        solve="echo x > /srv/locked/out.txt\n",
    )
    two = src / "zz_two_services"
    write(two, "task.yaml", "instruction: Use the database.\n")
    write(two, "Dockerfile", "FROM ubuntu:22.04\n")
    write(two, "docker-compose.yaml", TB_COMPOSE + "  db:\n    image: postgres:16\n")
    write(two, "run-tests.sh", TB_RUN_TESTS)
