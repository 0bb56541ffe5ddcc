#!/usr/bin/env bash
# The real-engine tier: the faithful path driven through the real SGLang and vLLM packages, on the CPU.
#
# Builds one virtual environment with the CUDA build of torch that lies on this machine's disk (torch 2.14.1 and
# torchvision 0.29.1: the engines' releases are built against it; it runs on the CPU), the dependencies that importing
# the engines' weight utilities asks for (.ci/engines/imports.txt, pinned by .ci/engines/constraints.txt) and
# ckptprof itself; then puts each engine release, installed with --no-deps into a folder of its own, on PYTHONPATH in
# turn and runs the tier's tests (tests/engines) and every stand-in test against it.
#
#   bash .ci/engines.sh                 # every release in RELEASES
#   bash .ci/engines.sh sglang==0.5.23  # one
#
# The environment is kept between runs on one machine (ENGINES_ROOT); the wheels come from pip's cache after the
# first run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1

# The newest SGLang and one from before multithreaded loading became the default (0.5.10); the newest vLLM and one
# from before its prefetch strategy (0.18).
RELEASES=(sglang==0.5.23 sglang==0.5.9 vllm==0.34.0 vllm==0.11.0)
[ "$#" -gt 0 ] && RELEASES=("$@")

root="${ENGINES_ROOT:-/var/tmp/ckptprof-engines}"
venv="$root/venv"
py="$venv/bin/python"
mkdir -p "$root"

constraints="$root/constraints.txt"
cat .ci/engines/constraints.txt >"$constraints"

if ! "$py" -c "import torch, torchvision; assert torch.__version__.startswith('2.14.1')" 2>/dev/null; then
    rm -rf "$venv"
    python -m venv "$venv"
    echo "engine tier: torch 2.14.1 (CUDA build, from this machine's disk) into $venv"
    "$py" -m pip install -q torch==2.14.1 torchvision==0.29.1
fi
"$py" -m pip install -q -c "$constraints" -r .ci/engines/imports.txt
# ckptprof from this checkout, with the test tools (torch is there already: nothing larger is pulled in).
"$py" -m pip install -q -c "$constraints" -e ".[test,spy]"

status=0
for spec in "${RELEASES[@]}"; do
    name="${spec%%==*}"
    version="${spec##*==}"
    site="$root/site/$name-$version"
    if [ ! -f "$site/.installed" ]; then
        rm -rf "$site"
        "$py" -m pip install -q --no-deps --target "$site" "$spec"
        touch "$site/.installed"
    fi
    echo "engine tier: $spec"
    # CKPTPROF_REAL_ENGINE names the release the tests must find; the stand-in packages step aside for it.
    # The tier's own tests and every test of this engine's stand-in (marked `engine`), now against the real release.
    if [ "$name" = vllm ]; then
        standin_tests=(tests/unit/test_vllm_own.py tests/integration/test_vllm_run.py)
    else
        standin_tests=(tests/unit/test_sglang_own.py tests/integration/test_run.py)
    fi
    if ! (cd "$repo" && CKPTPROF_REAL_ENGINE="$spec" PYTHONPATH="$site" "$py" -m pytest -q -p no:cacheprovider \
        --benchmark-disable -m engine tests/engines "${standin_tests[@]}"); then
        status=1
    fi
done
exit "$status"
