#include "ops/kernels/expression.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "kbuild/kernel_builder.hpp"

namespace trn::ops::kernels {

using kbuild::HbmTensor;
using kbuild::KernelBuilder;
using kbuild::Operand;
using kbuild::ScalarArg;
using kbuild::Tile;

namespace {

bool spreads_along_rows(Layout l) {  // one value per column for every partition
  return l == Layout::kRow || l == Layout::kScalar;
}
bool one_column(Layout l) {
  return l == Layout::kCol || l == Layout::kScalar;
}

std::optional<std::string> check(const ExprConfig &c) {
  if (c.rows == 0 || c.cols == 0)
    return fmt::format("{}: the shape [{}, {}] is empty", c.name, c.rows, c.cols);
  const size_t values = c.inputs.size() + c.steps.size();
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const ExprStep &s = c.steps[i];
    const size_t here = c.inputs.size() + i;
    const bool uses_a = s.kind != ExprStep::Kind::kScalar && s.kind != ExprStep::Kind::kIndex;
    const bool uses_b = s.kind == ExprStep::Kind::kAlu || s.kind == ExprStep::Kind::kSelect;
    if ((uses_a && s.a >= here) || (uses_b && s.b >= here) ||
        (s.kind == ExprStep::Kind::kSelect && s.c >= here))
      return fmt::format("{}: step {} uses a value not computed before it", c.name, i);
    if (s.scalar >= static_cast<int>(c.scalars))
      return fmt::format("{}: step {} uses scalar {} of {}", c.name, i, s.scalar, c.scalars);
  }
  for (const ExprOutput &o : c.outputs) {
    if (o.value >= values) return fmt::format("{}: an output names value {}", c.name, o.value);
    if (o.input >= static_cast<int>(c.inputs.size()))
      return fmt::format("{}: an output writes input {}", c.name, o.input);
    if (o.int64 && (o.input >= 0 || o.dtype != isa::DType::kI32))
      return fmt::format("{}: an int64 output is an i32 word pair of its own", c.name);
  }
  return std::nullopt;
}

// Columns per chunk: every value of an iteration lives in SBUF at once, fp32, and two
// iterations' worth should fit so that loads of the next overlap this one.
uint64_t chunk_columns(const ExprConfig &c) {
  uint64_t values = c.inputs.size() + c.steps.size() + c.outputs.size() + 1;
  for (const ExprOutput &o : c.outputs) values += o.int64 ? 3 : 0;  // the word pair and the sign
  const uint64_t per_column = values * 4 * 2;
  return std::clamp<uint64_t>(c.target.sbuf_bytes() / 2 / per_column, 1, 4096);
}

// A computed value: a tile of [p, cols] or [p, 1].
struct Value {
  Tile tile;
  bool column = false;
};

}  // namespace

std::string expression_signature(const ExprConfig &c) {
  // Readable where it names the kernel, compact bytes for the steps: ops issue this on every
  // call, so it is built without formatting each field.
  std::string s = fmt::format("expr {} [{}, {}] {}/{}/{}/{} ", c.name, c.rows, c.cols,
                              c.inputs.size(), c.steps.size(), c.outputs.size(), c.scalars);
  auto put = [&s](const auto &v) { s.append(reinterpret_cast<const char *>(&v), sizeof v); };
  for (const ExprInput &i : c.inputs) {
    put(i.dtype);
    put(i.layout);
  }
  for (const ExprStep &st : c.steps) {
    put(st.kind);
    put(st.func);
    put(st.op);
    put(st.a);
    put(st.b);
    put(st.c);
    put(st.scalar);
    put(st.constant);
    put(st.reverse);
  }
  for (const ExprOutput &o : c.outputs) {
    put(o.value);
    put(o.dtype);
    put(o.input);
    put(o.int64);
  }
  put(c.index_base);
  return s;
}

kbuild::Built build_expression(const ExprConfig &c) {
  if (auto err = check(c)) return *err;
  KernelBuilder kb(fmt::format("{}_{}x{}", c.name, c.rows, c.cols), c.target);

  // Arguments: inputs (inout when written back), outputs of their own, scalars.
  std::vector<bool> written(c.inputs.size(), false);
  for (const ExprOutput &o : c.outputs)
    if (o.input >= 0) written[o.input] = true;
  std::vector<HbmTensor> in(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Layout l = c.inputs[i].layout;
    const std::vector<uint64_t> shape = {spreads_along_rows(l) ? 1 : c.rows,
                                         one_column(l) ? 1 : c.cols};
    const std::string name = fmt::format("in{}", i);
    in[i] = written[i] ? kb.inout(name, c.inputs[i].dtype, shape)
                       : kb.input(name, c.inputs[i].dtype, shape);
  }
  std::vector<HbmTensor> out(c.outputs.size());
  for (size_t i = 0; i < c.outputs.size(); ++i)
    out[i] = c.outputs[i].input >= 0
                 ? in[c.outputs[i].input]
                 : kb.output(fmt::format("out{}", i), c.outputs[i].dtype,
                             {c.rows, c.outputs[i].int64 ? 2 * c.cols : c.cols});
  std::vector<ScalarArg> scalars;
  for (uint32_t i = 0; i < c.scalars; ++i) scalars.push_back(kb.scalar(fmt::format("s{}", i)));

  const auto f32 = isa::DType::kF32;
  const uint32_t partitions = static_cast<uint32_t>(std::min<uint64_t>(kbuild::kRowTile, c.rows));
  kbuild::for_col_chunks(c.cols, chunk_columns(c), [&](uint64_t c0, uint32_t cc) {
    // Inputs the same for every row tile: loaded once per chunk, to every partition.
    std::vector<Tile> resident(c.inputs.size());
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const Layout l = c.inputs[i].layout;
      if (!spreads_along_rows(l)) continue;
      const uint32_t width = l == Layout::kScalar ? 1 : cc;
      resident[i] = kb.sbuf(f32, partitions, {width}, "broadcast");
      kb.load(resident[i],
              in[i].tile(0, 1, l == Layout::kScalar ? 0 : c0, width).broadcast_rows(partitions));
    }
    kbuild::for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
      std::vector<Value> v;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const Layout l = c.inputs[i].layout;
        if (resident[i].valid()) {
          v.push_back({resident[i].partition_slice(0, p), l == Layout::kScalar});
          continue;
        }
        const uint32_t width = l == Layout::kCol ? 1 : cc;
        Tile t = kb.sbuf(f32, p, {width}, fmt::format("in{}", i));
        kb.load(t, in[i].tile(r0, p, l == Layout::kCol ? 0 : c0, width));
        v.push_back({t, l == Layout::kCol});
      }
      for (const ExprStep &s : c.steps) {
        const Operand scalar = s.scalar >= 0 ? Operand(scalars[s.scalar]) : Operand(s.constant);
        Value r;
        switch (s.kind) {
          case ExprStep::Kind::kActivation:
            r = {kb.sbuf(f32, p, {v[s.a].column ? 1u : cc}), v[s.a].column};
            kb.activation(r.tile, v[s.a].tile, s.func);
            break;
          case ExprStep::Kind::kAluScalar:
            r = {kb.sbuf(f32, p, {v[s.a].column ? 1u : cc}), v[s.a].column};
            kb.tensor_scalar(r.tile, v[s.a].tile, s.op, scalar, isa::AluOp::kBypass, 0.0f,
                             s.reverse);
            break;
          case ExprStep::Kind::kScalar:
            r = {kb.sbuf(f32, p, {1}), true};
            kb.memset(r.tile, 0.0f);
            kb.tensor_scalar(r.tile, r.tile, isa::AluOp::kAdd, scalar);
            break;
          case ExprStep::Kind::kIndex:
            r = {kb.sbuf(f32, p, {cc}), false};
            kb.iota(r.tile, {{1, cc}}, static_cast<int32_t>(c.index_base + r0 * c.cols + c0),
                    static_cast<int32_t>(c.cols));
            break;
          case ExprStep::Kind::kSelect: {
            // mask = -(a != 0) as i32 (all ones or zero); r = ((b ^ c) & mask) ^ c on the
            // values' bits: exact where a blend would turn an unchosen infinity into NaN.
            auto spread = [&](const Value &x) {
              if (!x.column || cc == 1) return x.tile;
              const Tile t = kb.sbuf(f32, p, {cc});
              kb.copy(t, x.tile.broadcast(cc));
              return t;
            };
            const Tile cond = spread(v[s.a]), on = spread(v[s.b]), off = spread(v[s.c]);
            const Tile minus = kb.sbuf(f32, p, {cc});
            kb.tensor_scalar(minus, cond, isa::AluOp::kNotEqual, 0.0f, isa::AluOp::kMultiply,
                             -1.0f);
            const Tile mask = kb.sbuf(isa::DType::kI32, p, {cc});
            kb.copy(mask, minus);
            const Tile bits = kb.sbuf(isa::DType::kI32, p, {cc});
            const auto i32 = isa::DType::kI32;
            kb.tensor_tensor(bits, on.bitcast(i32), off.bitcast(i32), isa::AluOp::kBitwiseXor);
            kb.tensor_tensor(bits, bits, mask, isa::AluOp::kBitwiseAnd);
            kb.tensor_tensor(bits, bits, off.bitcast(i32), isa::AluOp::kBitwiseXor);
            r = {bits.bitcast(f32), false};
            break;
          }
          case ExprStep::Kind::kAlu: {
            const Value &a = v[s.a], &b = v[s.b];
            r = {kb.sbuf(f32, p, {a.column && b.column ? 1u : cc}), a.column && b.column};
            // A per-partition value is tensor_scalar's [P, 1] operand (first when it is a).
            if (a.column == b.column)
              kb.tensor_tensor(r.tile, a.tile, b.tile, s.op);
            else if (a.column)
              kb.tensor_scalar(r.tile, b.tile, s.op, a.tile, isa::AluOp::kBypass, 0.0f, true);
            else
              kb.tensor_scalar(r.tile, a.tile, s.op, b.tile);
            break;
          }
        }
        v.push_back(r);
      }
      for (size_t i = 0; i < c.outputs.size(); ++i) {
        Tile t = v[c.outputs[i].value].tile;
        if (v[c.outputs[i].value].column && cc > 1) {
          Tile spread = kb.sbuf(f32, p, {cc}, "spread");
          kb.copy(spread, t.broadcast(cc));
          t = spread;
        }
        if (!c.outputs[i].int64) {
          kb.store(out[i].tile(r0, p, c0, cc), t);
          continue;
        }
        // (low, high) words: the value as int32, then -1 where it is negative and 0 elsewhere.
        const Tile pair = kb.sbuf(isa::DType::kI32, p, {cc, 2}, "int64");
        kb.copy(pair.slice(1, 0, 1), t.reshape({cc, 1}));
        const Tile high = kb.sbuf(f32, p, {cc}, "sign");
        kb.tensor_scalar(high, t, isa::AluOp::kLess, 0.0f, isa::AluOp::kMultiply, -1.0f);
        kb.copy(pair.slice(1, 1, 1), high.reshape({cc, 1}));
        kb.store(out[i].tile(r0, p, 2 * c0, 2 * cc), pair.reshape({2 * cc}));
      }
    });
  });
  return kb.finish();
}

}  // namespace trn::ops::kernels
