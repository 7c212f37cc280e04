// `vortex quantize --in F --out G --format nvfp4|fp8_scaled [--layers blocks|blocks+refiner]
//  [--encode approx|exact] [--threads N]`: writes a ComfyUI-loadable quantized copy of a BF16 H3 checkpoint
// (io/quantize.h), quantizing only the block GEMM weights. NVFP4 uses the CPU reference quantizer
// (ref/nvfp4_quantize.h) with g = amax/2688; --encode approx (default) reproduces comfy-kitchen's CUDA kernel
// (needs the measured rcp.approx table), exact its eager IEEE-division path. An existing --out is kept unless
// --overwrite (and then replaced only if Vortex wrote it). Exit 2 on bad arguments or input, 1 on
// failures. Tested in tests/io/quantize_*_test.cpp (engine) and by hand: vortex synth + quantize + inspect.
#include <iostream>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "commands.h"
#include "interrupt.h"
#include "io/quantize.h"
#include "progress.h"
#include "ref/nvfp4_quantize.h"

namespace vortex::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, format, layers = "blocks", encode = "approx";
  int threads = 0;
  bool overwrite = false;
  bool quiet = false;
};

int run_quantize(const QuantizeArgs& args) {
  auto fail_args = [](const std::string& m) {
    std::cerr << "vortex quantize: error: " << m << "\n";
    return 2;
  };
  if (args.in.empty()) return fail_args("--in FILE is required (.safetensors or .safetensors.index.json)");
  if (args.out.empty()) return fail_args("--out FILE is required (.safetensors)");
  QuantizeOptions opt;
  opt.in = args.in;
  opt.out = args.out;
  Result<QuantFormat> format = quantize_format_from_name(args.format);
  if (!format.ok()) return fail_args(format.status().message());
  opt.format = *format;
  Result<QuantizeLayerSet> layers = quantize_layer_set_from_name(args.layers);
  if (!layers.ok()) return fail_args(layers.status().message());
  opt.layers = *layers;
  if (args.threads < 0 || args.threads > max_cpu_threads())
    return fail_args("--threads must be in [0, " + std::to_string(max_cpu_threads()) + "] (0: all cores; at most " +
                     std::to_string(kMaxThreadsPerCore) + "x the cores), got " + std::to_string(args.threads));
  opt.threads = args.threads;
  opt.overwrite = args.overwrite;

  if (opt.format == QuantFormat::kNvfp4) {
    ref::Nvfp4Options options;
    std::shared_ptr<const ref::RcpApproxTable> table;
    if (args.encode == "approx") {
      Result<std::shared_ptr<const ref::RcpApproxTable>> t = ref::RcpApproxTable::default_table();
      if (!t.ok()) {
        std::cerr << "vortex quantize: error: " << t.status().to_string()
                  << "\n  (--encode approx reproduces comfy-kitchen's CUDA quantizer and needs that table; "
                     "--encode exact uses comfy-kitchen's eager IEEE-division recipe instead)\n";
        return 1;
      }
      table = *t;
      options.encode = ref::Nvfp4Encode::kApproxInstructions;
      options.rcp = table.get();
    } else if (args.encode == "exact") {
      options.encode = ref::Nvfp4Encode::kExactDivision;
    } else {
      return fail_args("--encode must be approx or exact, got '" + args.encode + "'");
    }
    opt.nvfp4.global_scale = [](const uint16_t* w, int64_t n, int64_t k) {
      return ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(w, n, k, k));
    };
    opt.nvfp4.encode = [options, table](const uint16_t* w, int64_t n, int64_t k, float g, uint8_t* data,
                                        uint8_t* scales) {
      return ref::nvfp4_quantize(w, n, k, k, g, options, data, scales);
    };
    opt.nvfp4.description = args.encode == "approx"
                                ? "comfy-kitchen CUDA encode (div.approx/rcp.approx, measured sm_90 table)"
                                : "comfy-kitchen eager encode (IEEE division)";
  } else if (args.encode != "approx" && args.encode != "exact") {
    return fail_args("--encode must be approx or exact, got '" + args.encode + "'");
  }

  StderrProgress bar("quantize", args.quiet);
  auto progress = [&bar](const std::string& line) { bar.line(line); };
  Result<QuantizeSummary> s = quantize_checkpoint(opt, progress);
  if (!s.ok()) {
    if (interrupted()) await_interrupt_exit();
    std::cerr << "vortex quantize: error: " << s.status().to_string() << "\n";
    return exit_code_for(s.status());
  }
  std::cout << s->out << "\n";
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "quantize", "Quantize the block GEMM weights of a BF16 H3 checkpoint to ComfyUI nvfp4 or fp8_scaled");
  sub->add_option("--in", args->in, "Input .safetensors or .safetensors.index.json (BF16)");
  sub->add_option("-o,--out", args->out, "Output .safetensors (written atomically)");
  sub->add_option("--format", args->format, "nvfp4 | fp8_scaled")->required();
  sub->add_option("--layers", args->layers, "blocks | blocks+refiner (default blocks)");
  sub->add_option("--encode", args->encode,
                  "NVFP4 encode: approx (comfy-kitchen CUDA kernel, default) | exact (comfy-kitchen eager)");
  sub->add_option("--threads", args->threads, "Encode threads (default 0: all cores)");
  sub->add_flag("--overwrite", args->overwrite, "Replace an existing --out, only if Vortex wrote it");
  sub->add_flag("--quiet", args->quiet, "No progress output");
  sub->callback([args, &ctx]() {
    install_interrupt_cleanup("quantize");
    ctx.exit_code = run_quantize(*args);
  });
}

}  // namespace vortex::cli
