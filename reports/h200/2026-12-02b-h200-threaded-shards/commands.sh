set -e
export PYTHONPATH=$PWD
python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())'
python3 -m ckptprof synth -q -n 64 -s 4.7GB /tmp/ck >/dev/null
summ() { python3 - "$1" <<'PY'
import json,sys
from ckptprof.session import Session
from ckptprof.render.rows import rank_rows, headline
s=Session.load(sys.argv[1]); m=s.ranks[0].models[0]
sh=m.shards
print(s.config["strategy"], s.config["cache"], "wall %.3f"%m.wall_s, "busy", {k:round(v,3) for k,v in (m.busy_s or {}).items()}, "parts", {k:round(v,3) for k,v in (m.wall_parts_s or {}).items()})
print("  shard walls %.3f work %.3f queued %.3f thread-s read %.3f deser %.3f h2d %.3f"%(sum(x.wall_s for x in sh), sum(x.work_s for x in sh), sum(x.queued_s for x in sh), sum(x.read_s for x in sh), sum(x.deserialize_s for x in sh), sum(x.h2d_s for x in sh)))
print("  row", rank_rows(s)[0][3:10], "badge", headline(s))
print("  verdict", s.verdict.summary[:400])
PY
}
for spec in "sglang-mt warm" "pipelined cold" "pipelined warm" "sglang-mt cold"; do
  set -- $spec
  python3 -m ckptprof run /tmp/ck -q --strategy $1 --cache $2 --probe-sample 1GB -o $OUT/$1-$2 >/dev/null 2>$OUT/$1-$2.err || cat $OUT/$1-$2.err
  summ $OUT/$1-$2/session.json
done
python3 -m pytest -q -p no:cacheprovider --benchmark-disable tests/unit/test_threaded_shards.py tests/gpu/test_cuda_replay.py 2>&1 | tail -3
