#include "render/svgscript.h"

/* src/render/svgstyle.css and src/render/svgscript.js as C string literals, made at build
 * time by scripts/embed.js (binding.gyp's action, test/c's and test/fuzz's
 * Makefiles): edit those files. */
const char kf_svg_style[] =
#include "svgstyle.css.h"
    ;

/* kfLabel first (the tests read it from the file); the rest runs on load:
 * the script comes before the frames in the document. */
const char kf_svg_script[] =
#include "svgscript.js.h"
    ;
