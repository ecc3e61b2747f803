{
  "targets": [
    {
      "target_name": "kflame",
      "sources": [
        "src/binding.c",
        "src/profiler.c",
        "src/sampler.c",
        "src/timersampler.c",
        "src/collector.c",
        "src/offcpu.c",
        "src/ring.c",
        "src/stacks.c",
        "src/timeline.c",
        "src/aggregate.c",
        "src/namer.c",
        "src/folded.c",
        "src/addrmap.c",
        "src/symbolizer.c",
        "src/symtab.c",
        "src/elfsyms.c",
        "src/debugfile.c",
        "src/dwarfunwind.c",
        "src/xz.c",
        "src/kallsyms.c",
        "src/procmaps.c",
        "src/readfile.c",
        "src/threadrole.c",
        "src/error.c",
        "src/jitname.c",
        "src/codemap.c",
        "src/jitframes.c",
        "src/userstack.c",
        "src/v8frames.c",
        "src/jitlines.c",
        "src/jithook.c",
        "src/labels.c",
        "src/sigwatch.c",
        "src/perfmap.c",
        "src/safefile.c",
        "src/flametree.c",
        "src/svg.c",
        "src/svgscript.c",
        "src/framelabel.c",
        "src/flamehtml.c",
        "src/jit_shim.cc"
      ],
      "actions": [
        {
          "action_name": "embed",
          "inputs": ["scripts/embed.js", "src/svgscript.js", "src/svgstyle.css", "src/framekinds.json"],
          "outputs": [
            "<(SHARED_INTERMEDIATE_DIR)/kflame/svgscript.js.h",
            "<(SHARED_INTERMEDIATE_DIR)/kflame/svgstyle.css.h",
            "<(SHARED_INTERMEDIATE_DIR)/kflame/framekinds.json.h"
          ],
          "action": ["node", "scripts/embed.js", "<(SHARED_INTERMEDIATE_DIR)/kflame",
                     "src/svgscript.js", "src/svgstyle.css", "src/framekinds.json"]
        }
      ],
      "include_dirs": ["<(SHARED_INTERMEDIATE_DIR)/kflame"],
      "cflags_c": ["-std=gnu11", "-Wall", "-Wextra", "-O2", "-fno-omit-frame-pointer"],
      "cflags_cc": ["-std=gnu++17", "-Wall", "-Wextra", "-O2", "-fno-omit-frame-pointer", "-fno-exceptions"],
      "libraries": ["-lelf", "-llzma", "-lunwind-x86_64", "-lunwind", "-lstdc++", "-lpthread", "-lrt"],
      "conditions": [
        ["OS!='linux'", { "type": "none" }]
      ]
    }
  ]
}
