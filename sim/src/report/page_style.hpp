// The style every HTML page trainsim writes shares (the report, the sweep's market table): one
// look, inline (nothing fetched). A page appends its own rules after these (later rules win).
#pragma once

#include "trainsim/sim/report/lang.hpp"

#include <string_view>

namespace trainsim::sim::report_style {

inline constexpr std::string_view kPageCss = R"(
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; max-width: 1000px;
       margin: 24px auto; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
.meta, .note { color: #555; font-size: 13px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; }
tbody th { text-align: left; font-weight: 600; color: #444; }
thead th { vertical-align: bottom; border-bottom: 2px solid #ccc; }
thead th:first-child { text-align: left; }
svg { display: block; max-width: 100%; height: auto; margin: 8px 0; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
svg .axis { stroke: #888; }
svg .grid { stroke: #eee; }
)";

// The fonts of a page in a language with its own script, after the shared rules; nothing for
// English (its pages stay as they were). Simplified Chinese: the CJK faces the common systems
// ship (macOS PingFang SC / Hiragino Sans GB, Windows Microsoft YaHei, Linux Noto Sans CJK SC /
// Source Han Sans SC / WenQuanYi Micro Hei), locally installed only: nothing is fetched.
inline std::string_view lang_css(Lang lang) {
    if (lang != Lang::zh_cn) return {};
    return R"(
body, svg text { font-family: system-ui, -apple-system, "PingFang SC", "Hiragino Sans GB", "Microsoft YaHei",
                 "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", sans-serif; }
)";
}

} // namespace trainsim::sim::report_style
