#!/usr/bin/python3
"""Writes the seed frames of fuzz/corpus/frame/ (run once; the seeds are kept
in git as test data): valid requests, batches and control messages, each a
packed ClientFrame. Usage: make_seeds.py GEN_DIR OUT_DIR"""
import os, sys
sys.path.insert(0, sys.argv[1])
import gpubridge_pb2 as gb, vecadd_pb2 as va, echo_pb2 as ep, pagerank_pb2 as pr

out = sys.argv[2]
def env(corr, typ, key, mt, payload, kind=gb.KIND_REQUEST):
    e = gb.Envelope(correlation_id=corr, kind=kind, message_type=mt, payload=payload)
    e.grain.type = typ
    e.grain.key = key
    return e
def write(name, frame):
    with open(os.path.join(out, name), "wb") as f:
        f.write(frame.SerializeToString())

vec = va.VectorAddRequest(op=va.VectorAddRequest.OP_DIV, a=[1, 2, 3], b=[4, 0, 6]).SerializeToString()
f = gb.ClientFrame(); f.envelope.CopyFrom(env(1, "vecadd", 7, 1, vec)); write("vecadd.bin", f)
f = gb.ClientFrame(); f.envelope.CopyFrom(env(2, "echo", 3, 1, ep.EchoRequest(sequence=9, data=b"hi").SerializeToString())); write("echo.bin", f)
f = gb.ClientFrame()
for i in range(20):
    f.batch.envelopes.add().CopyFrom(env(10 + i, "vecadd" if i % 2 else "echo", i % 3, 1, vec if i % 2 else b""))
write("batch.bin", f)
f = gb.ClientFrame(); f.envelope.CopyFrom(env(3, "echo", 1, 1, b"", kind=gb.KIND_ONE_WAY)); write("oneway.bin", f)
for name, op in [("deactivate", "deactivate"), ("status", "status_request"), ("telemetry", "telemetry_request")]:
    e = gb.Envelope(correlation_id=4, kind=gb.KIND_CONTROL)
    getattr(e.control, op).grain_type = "echo"
    f = gb.ClientFrame(); f.envelope.CopyFrom(e); write("control_%s.bin" % name, f)
e = gb.Envelope(correlation_id=5, kind=gb.KIND_CONTROL); e.control.deactivate_grain.grain_type = "echo"; e.control.deactivate_grain.key = 3
f = gb.ClientFrame(); f.envelope.CopyFrom(e); write("control_deactivate_grain.bin", f)

# PageRank: a small graph laid out, loaded and iterated once, in one batch
# (the grains reply in ring order; later inputs meet the laid-out arena).
S, A = "pagerank.sender", "pagerank.aggregator"
f = gb.ClientFrame(); b = f.batch.envelopes
b.add().CopyFrom(env(40, S, 0, 9, pr.GraphInit(node_count=4, edge_count=5).SerializeToString()))
for typ in (S, A):
    b.add().CopyFrom(env(41, typ, 0, 10, pr.PartitionInit(first_node=0, node_count=4).SerializeToString()))
b.add().CopyFrom(env(42, S, 0, 11, pr.OutDegreeChunk(first_node=0, out_degrees=[2, 1, 1, 1]).SerializeToString()))
b.add().CopyFrom(env(43, A, 0, 12, pr.InOffsetChunk(first_node=0, offsets=[0, 1, 3, 4, 5]).SerializeToString()))
b.add().CopyFrom(env(44, A, 0, 13, pr.InEdgeChunk(first_edge=0, sources=[3, 0, 2, 0, 1]).SerializeToString()))
start = pr.StartIterationCommand(iteration=0, damping=0.85, node_count=4)
b.add().CopyFrom(env(45, S, 0, 1, start.SerializeToString()))
start.dangling_rank = 0.0
b.add().CopyFrom(env(46, A, 0, 1, start.SerializeToString()))
start.iteration, start.next_contributions = 1, True  # one round: the aggregator writes iteration 2's contributions
b.add().CopyFrom(env(48, A, 0, 1, start.SerializeToString()))
b.add().CopyFrom(env(47, A, 0, 14, pr.RankQuery(first_node=0, count=4).SerializeToString()))
write("pagerank.bin", f)

# PageRank spread over two devices (fuzz_frame runs two cpu devices): job 0's
# partition [0, 2) on key 2 (device 0 of 2), [2, 4) on key 0 (device 1);
# each device its own GraphInit and edges, offsets relative to them; the
# contributions cross between the devices' arenas. Then a chunk outside a
# partition (refused: not its own) and a query of the whole range.
f = gb.ClientFrame(); b = f.batch.envelopes
parts = [(2, 0, 2, [0, 1, 3], [3, 0, 2], [2, 1]), (0, 2, 2, [0, 1, 2], [0, 1], [1, 1])]
for key, first, count, offs, srcs, degs in parts:
    b.add().CopyFrom(env(60 + key, S, key, 9, pr.GraphInit(node_count=4, edge_count=len(srcs)).SerializeToString()))
for key, first, count, offs, srcs, degs in parts:
    for typ in (S, A):
        b.add().CopyFrom(env(62, typ, key, 10, pr.PartitionInit(first_node=first, node_count=count).SerializeToString()))
    b.add().CopyFrom(env(63, S, key, 11, pr.OutDegreeChunk(first_node=first, out_degrees=degs).SerializeToString()))
    b.add().CopyFrom(env(64, A, key, 12, pr.InOffsetChunk(first_node=first, offsets=offs).SerializeToString()))
    b.add().CopyFrom(env(65, A, key, 13, pr.InEdgeChunk(first_edge=0, sources=srcs).SerializeToString()))
start = pr.StartIterationCommand(iteration=0, damping=0.85, node_count=4)
for key in (2, 0):
    b.add().CopyFrom(env(66, S, key, 1, start.SerializeToString()))
start.next_contributions = True
for key in (2, 0):
    b.add().CopyFrom(env(67, A, key, 1, start.SerializeToString()))
b.add().CopyFrom(env(68, S, 2, 11, pr.OutDegreeChunk(first_node=2, out_degrees=[1]).SerializeToString()))
b.add().CopyFrom(env(69, A, 0, 14, pr.RankQuery(first_node=0, count=4).SerializeToString()))
write("pagerank_devices.bin", f)
