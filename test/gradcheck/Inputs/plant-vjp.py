"""Plants a wrong vector-Jacobian product in a compiled bundle (.mtb, JSON).

    plant-vjp.py IN.mtb OUT.mtb LAYER PARAM FACTOR

Multiplies the gradient that layer LAYER's backward hands to
`param_grad PARAM` by FACTOR (a `constant` and a `mul` inserted before it),
so every instance of the layer gets a gradient of PARAM off by that factor
while the forward pass, and so the finite differences, are unchanged.
Standard library only (test/gradcheck/plant.test).
"""
import json
import sys


def main():
    src, dst, layer, param, factor = sys.argv[1:6]
    with open(src) as f:
        bundle = json.load(f)
    layers = [l for l in bundle["layers"] if l["name"] == layer]
    if not layers:
        sys.exit(f"no layer {layer}")
    fn = layers[0]["functions"]["backward"]
    ops = fn["ops"]
    at = [i for i, op in enumerate(ops)
          if op["op"] == "param_grad" and op.get("symbol") == param]
    if len(at) != 1:
        sys.exit(f"layer {layer} has no param_grad {param}")
    op = ops[at[0]]
    grad = op["operands"][0]
    values = fn["values"]
    const_id, scaled_id = len(values), len(values) + 1
    values.append({"dtype": "f32", "shape": []})
    values.append(dict(values[grad]))
    loc = op.get("loc", "planted")
    ops[at[0]:at[0]] = [
        {"op": "constant", "operands": [], "results": [const_id],
         "attrs": {"value": float(factor)}, "loc": loc},
        {"op": "mul", "operands": [grad, const_id], "results": [scaled_id],
         "loc": loc},
    ]
    op["operands"][0] = scaled_id
    with open(dst, "w") as f:
        json.dump(bundle, f)


if __name__ == "__main__":
    main()
