/*
 * svgscript: the script and style embedded in every flame graph SVG.
 * Hover shows a frame's details; click zooms into it (ancestors stay,
 * faded, above it); "Search" highlights frames matching a regular
 * expression and shows the share of samples they cover (nested matches
 * counted once); zoom and search are kept in the URL's #fragment. A graph
 * taller than the window opens scrolled to its roots. The script defines
 * kfLabel(name, cwd), src/render/framelabel.h's rule, for labels redrawn on zoom.
 * Both live as files, src/render/svgscript.js and src/render/svgstyle.css, embedded at
 * build time (scripts/embed.js). Constant; any thread.
 */
#ifndef KF_SVGSCRIPT_H
#define KF_SVGSCRIPT_H

extern const char kf_svg_style[];
extern const char kf_svg_script[];

#endif
