// tf_stitch/runtime/op/signature.cc
//
// The op's attrs decoded: shapes in the compact encoding (common.h), split per
// tensor, their symbols bound to the input dims that carry them, and the
// checks that make a corrupt attr an InvalidArgument, never a crash.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common.h"

namespace tf_stitch {
namespace {

// Returns the number of symbols (max index + 1) referenced by `shapes`, or an
// error if an index is out of range.
absl::Status CountSymbols(const std::vector<const EncodedShape*>& shapes,
                          int64_t* count) {
  *count = 0;
  for (const EncodedShape* shape : shapes) {
    for (int64_t d : *shape) {
      if (!IsSymbol(d)) continue;
      const int64_t s = SymbolOf(d);
      if (s >= kMaxSymbols) {
        return InvalidArgument("symbol index ", s, " exceeds the limit of ",
                               kMaxSymbols - 1);
      }
      *count = std::max(*count, s + 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatEncoded(const EncodedShape& shape) {
  std::vector<std::string> parts;
  parts.reserve(shape.size());
  for (int64_t d : shape) {
    parts.push_back(IsSymbol(d) ? absl::StrCat("s", SymbolOf(d))
                                : absl::StrCat(d));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::Status SplitShapes(const std::string& what,
                         const std::vector<int64_t>& ranks,
                         const std::vector<int64_t>& dims,
                         std::vector<EncodedShape>* shapes) {
  int64_t total = 0;
  for (int64_t rank : ranks) {
    if (rank < 0) {
      return InvalidArgument(what, "_ranks has a negative rank ", rank);
    }
    // Stop once the ranks exceed the dims (written so that it cannot overflow).
    if (rank > static_cast<int64_t>(dims.size()) - total) {
      total = static_cast<int64_t>(dims.size()) + 1;
      break;
    }
    total += rank;
  }
  if (total != static_cast<int64_t>(dims.size())) {
    return InvalidArgument("the ", what, "_ranks [", absl::StrJoin(ranks, ", "),
                           "] do not add up to the ", dims.size(),
                           " entries of ", what, "_dims");
  }
  shapes->clear();
  auto it = dims.begin();
  for (int64_t rank : ranks) {
    shapes->emplace_back(it, it + rank);
    it += rank;
  }
  return absl::OkStatus();
}

absl::Status BindSymbolSources(Signature* sig) {
  std::vector<const EncodedShape*> all;
  for (const auto& s : sig->inputs) all.push_back(&s);
  for (const auto& s : sig->outputs) all.push_back(&s);
  all.push_back(&sig->units);
  int64_t num_symbols = 0;
  TF_RETURN_IF_ERROR(CountSymbols(all, &num_symbols));
  sig->binders.assign(num_symbols, Binder{});
  for (int i = 0; i < static_cast<int>(sig->inputs.size()); ++i) {
    const EncodedShape& shape = sig->inputs[i];
    for (int j = 0; j < static_cast<int>(shape.size()); ++j) {
      if (!IsSymbol(shape[j])) continue;
      Binder& binder = sig->binders[SymbolOf(shape[j])];
      if (binder.input < 0) binder = Binder{i, j};
    }
  }
  auto check = [&](const EncodedShape& shape,
                   const std::string& where) -> absl::Status {
    for (int64_t d : shape) {
      if (IsSymbol(d) && sig->binders[SymbolOf(d)].input < 0) {
        return InvalidArgument(
            "symbol s", SymbolOf(d), " used by ", where, " ",
            FormatEncoded(shape),
            " does not appear in any input shape, so it cannot be bound");
      }
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < static_cast<int>(sig->outputs.size()); ++i) {
    TF_RETURN_IF_ERROR(check(sig->outputs[i], absl::StrCat("output ", i)));
  }
  return check(sig->units, "unit_dims");
}

absl::Status CheckSignature(const Signature& sig, int64_t num_input_types,
                            int64_t num_input_ranks, int64_t num_outputs,
                            int64_t num_output_ranks) {
  const std::string prefix =
      absl::StrCat("StitchedKernel '", sig.kernel_name, "': ");
  // The key becomes part of a file path: insisting on exactly 64 lowercase hex
  // characters also rules out path traversal ("../", "/").
  if (sig.cache_key.size() != kCacheKeyLength || !IsLowerHex(sig.cache_key)) {
    return InvalidArgument(prefix, "cache_key must be ", kCacheKeyLength,
                           " lowercase hex characters, got '", sig.cache_key,
                           "'");
  }
  if (sig.unit_cost < 0) {
    return InvalidArgument(prefix, "unit_cost must be >= 0, got ",
                           sig.unit_cost);
  }
  if (sig.block_rows < 1) {
    return InvalidArgument(prefix, "block_rows must be >= 1, got ",
                           sig.block_rows);
  }
  if (num_input_ranks != num_input_types) {
    return InvalidArgument(prefix, "Tin has ", num_input_types,
                           " types but input_ranks has ", num_input_ranks,
                           " entries");
  }
  if (num_output_ranks != num_outputs) {
    return InvalidArgument(prefix, "Tout has ", num_outputs,
                           " types but output_ranks has ", num_output_ranks,
                           " entries");
  }
  return absl::OkStatus();
}

}  // namespace tf_stitch
