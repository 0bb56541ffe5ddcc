#!/usr/bin/env bash
# Builds .engine/ for the campaign's `enginedeps` step (issue 30): the real SGLang release for Python 3.12 and the
# wheels of what importing its weight utilities asks for that the H200 image lacks. Run here, in the repository's
# root, with PyPI reachable; the H200 machine reaches nothing. .engine/ must be ignored (.git/info/exclude).
#
# The release's compiled Rust extensions (sglang/srt/rust_extensions, mem_cache/rust_tree_core: 44 MB of .so files
# that the weight utilities never import) are left out so that the whole tree stays under the 64 MiB a call carries;
# sglang-kernel (373 MB) is not carried at all: ckptprof stands in for it where it is absent.
set -euo pipefail
SGLANG=${SGLANG:-0.5.23}
out=.engine
tmp=$(mktemp -d)
mkdir -p "$out"
get() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$1" "${@:2}"
}
get "$tmp" "sglang==$SGLANG"
(cd "$tmp" && unzip -q sglang-*.whl 'sglang/*' "sglang-$SGLANG.dist-info/*" &&
    tar --exclude='*.so' -cJf "sglang-$SGLANG-noso.tar.xz" sglang "sglang-$SGLANG.dist-info")
mv "$tmp/sglang-$SGLANG-noso.tar.xz" "$out/"
# Versions as the CPU tier pins them (.ci/engines/constraints.txt), where the image has none of its own.
get "$out" ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2 \
    pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3 executing==2.3.0 \
    asttokens==3.0.2 pure_eval==0.2.4 traitlets==5.16.1 decorator annotated-types==0.8.0 compressed-tensors==0.20.1 \
    dill==0.4.1 gguf==0.19.0 loguru==0.7.3 msgspec==0.23.0 orjson==3.13.0 pybase64==1.5.1 pydantic==2.14.4 \
    pydantic_core==2.50.5 sniffio==1.3.1 starlette==1.10.0 truststore==0.10.5 apache-tvm-ffi==0.1.15.post2 \
    typing-inspection==0.4.5 pyzmq==27.3.0
rm -rf "$tmp"
du -sh "$out"
