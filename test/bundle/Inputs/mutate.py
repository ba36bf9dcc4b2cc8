"""Hand-edits of a compiled bundle (.mtb) that the runtime must refuse at load.

usage: mutate.py MUTATION IN.mtb OUT.mtb

Each mutation is what a person editing the JSON by hand (or a damaged file)
could produce; test/bundle/*.test runs `mtc train` on the result. Standard
library only.
"""
import base64
import json
import struct
import sys


def functions(b):
    """(where, function) for every function of the bundle, fused bodies too."""
    out = [("model", f) for f in b["functions"].values()]
    for l in b["layers"]:
        out += [("layer", f) for f in l["functions"].values()]
        for x in l.get("experts", []):
            out += [("expert", f) for f in x["functions"].values()]
    return out


def first_op(f, name, pred=lambda f, o: True):
    for o in f["ops"]:
        if o["op"] == name and pred(f, o):
            return o
    raise SystemExit("no '%s' op to mutate" % name)


def shape(f, v):
    return f["values"][v]["shape"]


def layer_fn(b, name="forward"):
    return b["layers"][0]["functions"][name]


def matmul_wrong_operand(b):
    # The weight of the first matmul becomes a 1-D value (a norm weight).
    f = layer_fn(b)
    mm = first_op(f, "matmul")
    vec = next(v for v in range(len(f["values"])) if len(shape(f, v)) == 1)
    mm["operands"][1] = vec


def embedding_swapped(b):
    # ids and table trade places in forward_backward, the function training
    # runs.
    first_op(b["functions"]["forward_backward"], "embedding")["operands"].reverse()


def matmul_as_add(b):
    # x [B, S, D] @ w [D, F] renamed to an add: the shapes do not broadcast.
    f = layer_fn(b)
    mm = first_op(f, "matmul", lambda f, o: shape(f, o["operands"][1])[-1]
                  != shape(f, o["operands"][0])[-1])
    mm["op"] = "add"


def damaged_kernels(b):
    # int3 over the .text of the compiled CPU kernels (the checksum stays).
    k = b["cpu_kernels"]
    so = bytearray(base64.b64decode(k["data"]))
    shoff, = struct.unpack_from("<Q", so, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", so, 0x3A)
    def section(i):
        return struct.unpack_from("<IIQQQQ", so, shoff + i * shentsize)
    strtab = section(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = section(i)
        if so[strtab + name:strtab + name + 6] == b".text\0":
            so[off:off + size] = b"\xcc" * size
            break
    else:
        raise SystemExit("no .text section")
    k["data"] = base64.b64encode(bytes(so)).decode()


def fused_operand(b):
    # A [B, S, D] input of a fused op with a compiled kernel replaced by a
    # [D] value (and its body argument retyped to match): broadcasting makes
    # the body valid, but the kernel reads D * B * S elements of it.
    f = layer_fn(b, "backward")
    vectors = {}  # size -> a 1-D value defined before the op at hand
    for v in f["args"]:
        if len(shape(f, v)) == 1:
            vectors[shape(f, v)[0]] = v
    for op in f["ops"]:
        if (op["op"] == "fused" and "kernel" in op.get("attrs", {}) and
                len(op["operands"]) == 3 and
                len(shape(f, op["operands"][2])) == 3 and
                shape(f, op["operands"][2])[-1] in vectors):
            break
        for v in op["results"]:
            if len(shape(f, v)) == 1:
                vectors[shape(f, v)[0]] = v
    else:
        raise SystemExit("no fused op to mutate")
    d = shape(f, op["operands"][2])[-1]
    op["operands"][2] = vectors[d]
    body = op["region"]
    body["values"][body["args"][2]]["shape"] = [d]


def value_out_of_range(b):
    f = layer_fn(b)
    first_op(f, "matmul")["operands"][0] = len(f["values"]) + 100


def unknown_op(b):
    first_op(layer_fn(b), "rmsnorm")["op"] = "rmsnorm_fast"


def missing_attribute(b):
    del first_op(layer_fn(b, "backward"), "transpose")["attrs"]["perm"]


def ill_typed_attribute(b):
    first_op(layer_fn(b), "rmsnorm")["attrs"]["eps"] = "small"


def use_before_definition(b):
    # The first matmul reads the value the last op of the function defines.
    f = layer_fn(b)
    first_op(f, "matmul")["operands"][0] = f["ops"][-1]["results"][0]


def unknown_parameter(b):
    first_op(layer_fn(b), "param_ref")["symbol"] = "nope"


def targets_as_float(b):
    # The targets argument of the model's functions becomes f32.
    for f in b["functions"].values():
        f["values"][f["args"][1]]["dtype"] = "f32"


def missing_checksum(b):
    del b["cpu_kernels"]["xxh64"]


def plan_loop_count(b):
    loop = next(c for c in b["step"]["program"] if c["op"] == "layers")
    loop["count"] = loop["count"] - 1


def plan_no_workspace(b):
    for buf in b["step"]["buffers"]:
        if buf["name"] == "workspace":
            buf["name"] = "scratch"


def plan_segment_no_buffer(b):
    # Segment checkpointing asked of a plan that has no segment buffer.
    b["step"]["checkpoint_every"] = 2


def plan_segment_slots(b):
    # Segments longer than the weight slots (a segment's instances stay
    # resident from their recomputed forward to their backward).
    b["step"]["checkpoint_every"] = b["step"]["prefetch_depth"] + 1


def loop(b, direction):
    return next(c for c in b["step"]["program"]
                if c["op"] == "layers" and c["direction"] == direction)


def drop(body, op):
    i = next(i for i, c in enumerate(body) if c["op"] == op)
    del body[i]


def plan_no_wait(b):
    # The forward compute no longer waits for its weights.
    drop(loop(b, "forward")["body"], "wait_weights")


def plan_wait_after_compute(b):
    body = loop(b, "backward")["body"]
    i = next(i for i, c in enumerate(body) if c["op"] == "wait_weights")
    body.append(body.pop(i))


def plan_no_optimizer_update(b):
    # Last step's AdamW update would run after the weights were copied.
    drop(loop(b, "forward")["body"], "optimizer_update")


def plan_update_after_prefetch(b):
    body = loop(b, "forward")["body"]
    i = next(i for i, c in enumerate(body) if c["op"] == "optimizer_update")
    body.insert(3, body.pop(i))


def plan_no_grad_return(b):
    drop(loop(b, "backward")["body"], "grad_return")


def plan_two_grad_returns(b):
    body = loop(b, "backward")["body"]
    body.append(dict(next(c for c in body if c["op"] == "grad_return")))


def plan_no_save(b):
    drop(loop(b, "forward")["body"], "save")


def plan_save_elsewhere(b):
    # Checkpoints kept in device memory by a plan that keeps them in host
    # memory (its device 'checkpoints' buffer is only the staging).
    next(c for c in loop(b, "forward")["body"] if c["op"] == "save")["to"] = (
        "device" if b["step"]["checkpoints"] == "host" else "host")


def plan_prefetch_beyond_slots(b):
    next(c for c in loop(b, "forward")["body"]
         if c["op"] == "prefetch")["ahead"] = b["step"]["prefetch_depth"]


def plan_no_model_load(b):
    drop(b["step"]["program"], "load_model_weights")


def plan_no_model_return(b):
    drop(b["step"]["program"], "return_model_grads")


def plan_no_forward(b):
    # The forward layers loop dropped: its apply_layers op runs in no command.
    program = b["step"]["program"]
    program.remove(loop(b, "forward"))


def plan_stage_twice(b):
    program = b["step"]["program"]
    i = next(i for i, c in enumerate(program) if c["op"] == "stage")
    program.insert(i + 1, dict(program[i]))


def rows_kernel(b):
    return next(k for k in b["cuda_kernels"]["kernels"] if k["launch"] == "rows")


def cuda_rows_block(b):
    # A block of 32 threads (one warp, one row) given per_block rows.
    rows_kernel(b)["entries"][0]["block"] = 32


def cuda_rows_per_block(b):
    e = rows_kernel(b)["entries"][0]
    e["per_block"] = e["per_block"] * 2


def cuda_row_length(b):
    k = rows_kernel(b)
    k["row"] = k["row"] * 2


def cuda_rows_as_elements(b):
    rows_kernel(b)["launch"] = "elements"


def cuda_block_beyond_bounds(b):
    e = rows_kernel(b)["entries"][0]
    e["block"] = 2 * e["block"]
    e["per_block"] = e["block"] // 32


MUTATIONS = {f.__name__.replace("_", "-"): f for f in [
    matmul_wrong_operand, embedding_swapped, matmul_as_add, damaged_kernels,
    fused_operand, value_out_of_range, unknown_op, missing_attribute, ill_typed_attribute,
    use_before_definition, unknown_parameter, targets_as_float,
    missing_checksum, plan_loop_count, plan_no_workspace,
    plan_segment_no_buffer, plan_segment_slots, plan_no_wait,
    plan_wait_after_compute, plan_no_optimizer_update,
    plan_update_after_prefetch, plan_no_grad_return, plan_two_grad_returns,
    plan_no_save, plan_save_elsewhere, plan_prefetch_beyond_slots,
    plan_no_model_load, plan_no_model_return, plan_no_forward,
    plan_stage_twice, cuda_rows_block, cuda_rows_per_block, cuda_row_length,
    cuda_rows_as_elements, cuda_block_beyond_bounds]}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in MUTATIONS:
        raise SystemExit("usage: mutate.py {%s} IN.mtb OUT.mtb"
                         % ",".join(MUTATIONS))
    with open(sys.argv[2]) as f:
        b = json.load(f)
    MUTATIONS[sys.argv[1]](b)
    with open(sys.argv[3], "w") as f:
        json.dump(b, f, indent=1)


if __name__ == "__main__":
    main()
