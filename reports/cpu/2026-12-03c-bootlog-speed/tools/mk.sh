#!/bin/bash
# mk.sh SRC_ROOT NAME -> /tmp/bl34/pk/ckptprof_NAME
SRC=$1; N=$2; D=/tmp/bl34/pk/ckptprof_$N
rm -rf $D; mkdir -p /tmp/bl34/pk; cp -r $SRC/ckptprof $D
find $D -name "*.py" -exec sed -i -E "s/\bckptprof\./ckptprof_$N./g; s/from ckptprof import/from ckptprof_$N import/g; s/^import ckptprof$/import ckptprof_$N/" {} +
find $D -name "__pycache__" -prune -exec rm -rf {} +
