{
  "targets": [
    {
      "target_name": "kflame",
      "sources": [
        "src/binding.c",
        "src/profiler.c",
        "src/sample/perfwarm.c",
        "src/sample/pidfilter.c",
        "src/sample/bpf.c",
        "src/sample/bpfring.c",
        "src/sample/switchin.c",
        "src/sample/sampler.c",
        "src/sample/timersampler.c",
        "src/collect/collector.c",
        "src/sample/offcpu.c",
        "src/sample/ring.c",
        "src/collect/stacks.c",
        "src/collect/timeline.c",
        "src/collect/aggregate.c",
        "src/collect/namer.c",
        "src/render/folded.c",
        "src/util/addrmap.c",
        "src/symbols/symbolizer.c",
        "src/symbols/symtab.c",
        "src/symbols/elfsyms.c",
        "src/symbols/debugfile.c",
        "src/unwind/dwarfunwind.c",
        "src/symbols/xz.c",
        "src/symbols/kallsyms.c",
        "src/symbols/procmaps.c",
        "src/util/readfile.c",
        "src/util/parked.c",
        "src/collect/threadrole.c",
        "src/util/error.c",
        "src/jit/jitname.c",
        "src/jit/codemap.c",
        "src/jit/jitframes.c",
        "src/unwind/userstack.c",
        "src/jit/v8frames.c",
        "src/jit/jitlines.c",
        "src/jit/v8inline.c",
        "src/jit/v8heap.c",
        "src/jit/v8regexp.c",
        "src/jit/jithook.c",
        "src/collect/labels.c",
        "src/util/sigwatch.c",
        "src/jit/perfmap.c",
        "src/util/safefile.c",
        "src/render/flametree.c",
        "src/render/svg.c",
        "src/render/svgscript.c",
        "src/render/framelabel.c",
        "src/render/flamehtml.c",
        "src/jit/jit_shim.cc"
      ],
      "actions": [
        {
          "action_name": "embed",
          "inputs": ["scripts/embed.js", "src/render/svgscript.js", "src/render/svgstyle.css", "src/render/framekinds.json"],
          "outputs": [
            "<(SHARED_INTERMEDIATE_DIR)/kflame/svgscript.js.h",
            "<(SHARED_INTERMEDIATE_DIR)/kflame/svgstyle.css.h",
            "<(SHARED_INTERMEDIATE_DIR)/kflame/framekinds.json.h"
          ],
          "action": ["node", "scripts/embed.js", "<(SHARED_INTERMEDIATE_DIR)/kflame",
                     "src/render/svgscript.js", "src/render/svgstyle.css", "src/render/framekinds.json"]
        }
      ],
      "include_dirs": ["src", "<(SHARED_INTERMEDIATE_DIR)/kflame"],
      "cflags_c": ["-std=gnu11", "-Wall", "-Wextra", "-O2", "-fno-omit-frame-pointer"],
      "cflags_cc": ["-std=gnu++17", "-Wall", "-Wextra", "-O2", "-fno-omit-frame-pointer", "-fno-exceptions"],
      "libraries": ["-lelf", "-llzma", "-lunwind-x86_64", "-lunwind", "-lstdc++", "-lpthread", "-lrt"],
      "conditions": [
        ["OS!='linux'", { "type": "none" }]
      ]
    }
  ]
}
