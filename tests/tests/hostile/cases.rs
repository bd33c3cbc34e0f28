//! The hostile documents, each with the layer it attacks and how it must end.

use serde_json::{json, Value};

pub const TIMEOUT: u32 = 8;
/// For cases that start XeTeX or LuaTeX (seconds each on a loaded machine, with the complete
/// TeX Live's fonts) and a slow tool (biber, Java), unless they are meant to time out.
pub const TOOLS_TIMEOUT: u32 = 30;
/// Generous for the floods, which must hit their output limit long before it.
pub const FLOOD_TIMEOUT: u32 = 60;
/// The first line of the image's /etc/passwd, as text and as \pdffiledump's hex.
pub const PASSWD_MARKERS: &[&str] = &["root:x:0:0", "726F6F743A783A303A30", "726f6f743a783a303a30"];
/// What the host's Docker layout looks like in /proc/self/mountinfo.
pub const MOUNTINFO_MARKERS: &[&str] = &["lowerdir=", "upperdir=", "/var/lib/docker"];
/// What `id` prints, were a command ever run.
pub const COMMAND_MARKER: &str = "uid=";
/// A title of the TeX tree's xampl.bib, which only a read by absolute path would show.
pub const XAMPL: &str = "/usr/share/texlive/texmf-dist/bibtex/bib/base/xampl";
pub const XAMPL_MARKER: &str = "GnatsandGnus";
/// A configuration file every program may read (Landlock allows it), and the start of its text:
/// the cases that use it try reads that a layer above Landlock refuses (Lua's, Ghostscript's).
/// pdfTeX's `\pdfobj file` and `\pdfmapfile` do read it (SECURITY.md).
const CNF: &str = "/etc/texmf/web2c/texmf.cnf";
const CNF_MARKER: &str = "settingsthateverydocument";

pub struct Case {
    pub name: &'static str,
    pub engine: &'static str,
    pub document: String,
    pub files: Value,
    pub timeout: u32,
    pub halt_on_error: bool,
    /// Acceptable (status, error code) pairs; the code is None for Succeeded.
    pub expect: &'static [(&'static str, Option<&'static str>)],
    pub log_contains: Option<&'static str>,
    /// What the log must not hold (what a command would have written there).
    pub log_lacks: Option<&'static str>,
    pub text_contains: Option<&'static str>,
    /// What the PDF text (whitespace removed) must not hold, beside the common markers.
    pub text_lacks: Option<&'static str>,
    /// What the PDF's streams, inflated, must not hold.
    pub streams_lack: Option<&'static str>,
}

pub const SUCCEEDS: &[(&str, Option<&str>)] = &[("Succeeded", None)];
pub const COMPILE_ERROR: &[(&str, Option<&str>)] = &[("Failed", Some("compile_error"))];
pub const ANY_END: &[(&str, Option<&str>)] =
    &[("Succeeded", None), ("Failed", Some("compile_error"))];
pub const OUTPUT_LIMIT: &[(&str, Option<&str>)] = &[("Failed", Some("output_limit"))];

fn doc(body: &str) -> String {
    format!("\\documentclass{{article}}\n\\begin{{document}}\n{body}\nx\n\\end{{document}}\n")
}

/// A document that asks `primitives` of files outside the job and tells in the log, for each,
/// `stat-refused` or `stat-answered` (a word the document never writes whole).
fn stat_probes(primitives: &str) -> String {
    let probe = format!("\\def\\probe#1{{\\edef\\s{{{primitives}}}\\message{{stat-\\ifx\\s\\empty refused\\else answered\\fi}}}}");
    doc(&format!("{probe}\\probe{{/etc/passwd}}\\probe{{../../etc/passwd}}\\probe{{/proc/self/status}}\\probe{{/tmp}}\\probe{{$SELFAUTOPARENT/etc/passwd}}"))
}

fn case(
    name: &'static str,
    engine: &'static str,
    document: String,
    expect: &'static [(&'static str, Option<&'static str>)],
) -> Case {
    Case {
        name,
        engine,
        document,
        files: json!([]),
        timeout: match engine != "pdflatex"
            && !expect.iter().any(|(status, _)| *status == "TimedOut")
        {
            true => TOOLS_TIMEOUT,
            false => TIMEOUT,
        },
        halt_on_error: false,
        expect,
        log_contains: None,
        log_lacks: None,
        text_contains: None,
        text_lacks: None,
        streams_lack: None,
    }
}

/// A document that writes `content` to a file named `name` (a TeX string: ^^60 is a backquote).
fn writes_file(name: &str, content: &str) -> String {
    doc(&format!(
        "\\newwrite\\w\\immediate\\openout\\w={name} \\immediate\\write\\w{{{content}}}\\immediate\\closeout\\w"
    ))
}

/// A figure whose PostScript shows `show` on the page, were it allowed to run.
fn eps_figure(postscript: &str) -> Value {
    json!([{ "path": "fig.eps", "content": format!(
        "%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 300 50\n/Helvetica findfont 10 scalefont setfont 5 20 moveto\n{postscript}\nshowpage\n") }])
}

fn with_figure() -> String {
    "\\documentclass{article}\\usepackage{graphicx}\\begin{document}Figure: \\includegraphics{fig}\\end{document}".into()
}

pub fn cases(host_canary: &str) -> Vec<Case> {
    let lua = |code: &str| doc(&format!("\\directlua{{{code}}}"));
    let filler = "x".repeat(200);
    let mut cases = vec![
        // TeX running commands, plain and obfuscated: kpathsea runs only the three programs of
        // shell_escape_commands, through a /bin/sh that is not a shell and allows each only with
        // the arguments its package writes.
        Case { log_contains: Some("disabled"), ..case("write18", "pdflatex", doc("\\immediate\\write18{env > leak.tex}"), SUCCEEDS) },
        case("input pipe", "pdflatex", doc("\\input|\"id\" "), COMPILE_ERROR),
        Case { log_contains: Some("disabled"), ..case("write18 via catcodes", "pdflatex", doc("{\\catcode`\\!=0 !immediate!write18{id > p.tex}}"), SUCCEEDS) },
        Case { log_contains: Some("disabled"), ..case("write18 via ^^", "pdflatex", doc("\\immediate\\^^77rite18{uname -a > u.tex}"), SUCCEEDS) },
        Case { log_contains: Some("disabled"), ..case("write18 from xelatex", "xelatex", doc("\\immediate\\write18{id > i.tex}"), SUCCEEDS) },
        // The compile driver: names the document chose never reach a command line.
        Case { log_contains: Some("skipped makeindex"), ..case("index named with backticks", "pdflatex",
            writes_file("x^^60id>>output.pdf^^60.idx", "\\string\\indexentry{a}{1}"), SUCCEEDS) },
        Case { log_contains: Some("skipped makeindex"), ..case("index named with $(...)", "pdflatex",
            writes_file("x$(id).idx", "\\string\\indexentry{a}{1}"), SUCCEEDS) },
        Case { log_contains: Some("skipped bibtex"), ..case("aux with bibdata named with $(...)", "pdflatex",
            writes_file("b$(id).aux", "\\string\\bibdata{refs}"), SUCCEEDS) },
        Case { log_contains: Some("skipped the glossary"), ..case("glossary extension with backticks", "pdflatex",
            doc("\\makeatletter\\immediate\\write\\@auxout{\\string\\@newglossary{main}{glg}{gls}{g^^60id^^60o}}\\immediate\\write\\@auxout{\\string\\@istfilename{output.ist}}\\makeatother"), SUCCEEDS) },
        Case { log_contains: Some("skipped biber"), ..case("biber data source with backticks", "pdflatex",
            "\\documentclass{article}\\usepackage[backend=biber]{biblatex}\\addbibresource{x^^60id^^60.bib}\\begin{document}\\nocite{*}x\\printbibliography\\end{document}".into(), SUCCEEDS) },
        Case { log_contains: Some("skipped biber"), ..case("biber data source by absolute path", "pdflatex",
            format!("\\documentclass{{article}}\\usepackage[backend=biber]{{biblatex}}\\addbibresource{{{XAMPL}.bib}}\\begin{{document}}\\nocite{{*}}x\\printbibliography\\end{{document}}"), SUCCEEDS) },
        Case { log_contains: Some("skipped makeindex"), ..case("makeindex through a redefined jobname", "pdflatex",
            "\\documentclass{article}\\usepackage{makeidx}\\def\\jobname{x^^60id^^60}\\makeindex\\begin{document}a\\index{a}\\printindex\\end{document}".into(), SUCCEEDS) },
        case("nomenclature entries with backticks", "pdflatex",
            "\\documentclass{article}\\usepackage{nomencl}\\makenomenclature\\begin{document}x\\nomenclature{^^60id^^60}{$(id)}\\printnomenclature\\end{document}".into(), SUCCEEDS),
        Case { log_contains: Some("ran makeindex evil.idx"), ..case("makeindex options from a forged imakeidx message", "pdflatex",
            format!("{}\\typeout{{^^60makeindex -o /tmp/x evil.idx'}}", writes_file("evil.idx", "\\string\\indexentry{a}{1}")), SUCCEEDS) },
        case("bibtex database by absolute path", "pdflatex",
            doc(&format!("\\nocite{{*}}\\bibliographystyle{{plain}}\\bibliography{{{XAMPL}}}")), ANY_END),
        // Reads: kpathsea's openin_any = p, and Landlock below every program.
        case("input absolute path", "pdflatex", doc("\\input{/etc/passwd}"), COMPILE_ERROR),
        case("input traversal", "pdflatex", doc("\\input{../../../../../etc/passwd}"), COMPILE_ERROR),
        case("input host canary", "pdflatex", doc(&format!("\\input{{{host_canary}}}")), COMPILE_ERROR),
        case("input mountinfo", "pdflatex", doc("\\input{/proc/self/mountinfo}"), COMPILE_ERROR),
        case("openin", "pdflatex", doc("\\newread\\r\\openin\\r=/etc/passwd \\ifeof\\r closed\\else\\read\\r to\\x \\x\\fi"), ANY_END),
        case("verbatiminput", "pdflatex",
            "\\documentclass{article}\\usepackage{verbatim}\\begin{document}\\verbatiminput{/etc/passwd}\\end{document}".into(), ANY_END),
        case("lstinputlisting", "pdflatex",
            "\\documentclass{article}\\usepackage{listings}\\begin{document}\\lstinputlisting{/etc/passwd}x\\end{document}".into(), ANY_END),
        case("pdfobj file", "pdflatex",
            doc("\\immediate\\pdfobj stream file {/etc/passwd}\\pdfcatalog{/Leak \\the\\pdflastobj\\space 0 R}"), ANY_END),
        case("pdffiledump", "pdflatex", doc("\\edef\\x{\\pdffiledump length 400 {/etc/passwd}}[\\x]"), ANY_END),
        Case { log_contains: Some("MD5=[]"), ..case("pdfmdfivesum of a file outside the trees", "pdflatex",
            doc("\\message{MD5=[\\pdfmdfivesum file{/etc/passwd}]}"), SUCCEEDS) },
        Case { log_contains: Some("MD5=[]"), ..case("xetex mdfivesum of a file outside the trees", "xelatex",
            doc("\\message{MD5=[\\mdfivesum file{/etc/passwd}]}"), SUCCEEDS) },
        // Whether a file exists, its size and its date: kpathsea's name check before the stat,
        // which TeX Live 2026 needs restored, and 2022 for names kpathsea expands
        // (kpathsea-guard.c). Refused in every year.
        Case { log_contains: Some("stat-refused"), log_lacks: Some("stat-answered"),
            ..case("file size of a file outside the trees", "pdflatex",
                stat_probes("\\pdffilesize{#1}\\pdffilemoddate{#1}"), SUCCEEDS) },
        Case { log_contains: Some("stat-refused"), log_lacks: Some("stat-answered"),
            ..case("xetex file size of a file outside the trees", "xelatex",
                stat_probes("\\filesize{#1}\\filemoddate{#1}"), SUCCEEDS) },
        case("xetex fstream", "xelatex",
            doc("\\special{pdf:fstream @leak (/etc/passwd)}\\special{pdf:put @catalog <</Leak @leak>>}"), ANY_END),
        case("lualatex input absolute", "lualatex", doc("\\input{/etc/passwd}"), ANY_END),
        case("lualatex input mountinfo", "lualatex", doc("\\input{/proc/self/mountinfo}"), ANY_END),
        Case { text_contains: Some("passwd:refused"), ..case("lua io.open passwd", "lualatex",
            lua("local f, e = io.open('/etc/passwd') tex.print('passwd:' .. (f and f:read('*a') or 'refused'))"), SUCCEEDS) },
        Case { text_contains: Some("mountinfo:refused"), ..case("lua io.open mountinfo", "lualatex",
            lua("local f = io.open('/proc/self/mountinfo') tex.print('mountinfo:' .. (f and f:read('*a') or 'refused'))"), SUCCEEDS) },
        Case { text_contains: Some("canary:refused"), ..case("lua io.open host file", "lualatex",
            lua(&format!("local f = io.open('{host_canary}') tex.print('canary:' .. (f and f:read('*a') or 'refused'))")), SUCCEEDS) },
        // The driver's own files in /tmp (a tool's output, the pages it compares) are not Lua's.
        // (LuaTeX's openout_any already refuses writes there.)
        Case { text_contains: Some("tmp:refused"), ..case("lua lists tmp", "lualatex",
            lua("tex.print('tmp:' .. (type(lfs.dir('/tmp')) == 'function' and 'allowed' or 'refused'))"), SUCCEEDS) },
        // Nor TeX's, though LuaTeX reads with openin_any = r: the shell escape's record exists
        // once kpsewhich has run (LuaTeX has no \write18: os.execute is its shell escape).
        Case { text_contains: Some("tmpread:refused-refused"), ..case("luatex openin of the driver's tmp", "lualatex",
            doc("\\directlua{os.execute('kpsewhich article.cls')}\\newread\\r\\openin\\r=/tmp/texfleet-shell-escape \\ifeof\\r tmpread:refused\\else tmpread:allowed\\closein\\r\\fi\\openin\\r=../tmp/texfleet-shell-escape \\ifeof\\r -refused\\else -allowed\\closein\\r\\fi"), SUCCEEDS) },
        // Turning the sandbox's callback off leaves TeX's own lookup, which the engine's
        // Landlock layer still keeps out of /tmp.
        Case { text_contains: Some("disabled:refused"), ..case("luatex openin after disabling the sandbox's callback", "lualatex",
            doc("\\directlua{os.execute('kpsewhich article.cls') luatexbase.disable_callback('find_read_file')}\\newread\\r\\openin\\r=/tmp/texfleet-shell-escape \\ifeof\\r disabled:refused\\else disabled:allowed\\fi"), SUCCEEDS) },
        // A data file the callback refuses is not opened by its name as written.
        Case { streams_lack: Some("package Biber"), ..case("luatex pdfobj file primitive outside the trees", "lualatex",
            doc("\\pdfvariable compresslevel=0 \\immediate\\pdfextension obj stream file {/usr/share/perl5/Biber.pm}\\pdfextension catalog {/Leak \\the\\pdffeedback lastobj\\space 0 R}"), ANY_END) },
        // zlib, zziplib and HarfBuzz open files by any name.
        Case { text_contains: Some("libraries:refused-refused-refused"), ..case("lua gzip zip and harfbuzz reading tmp", "lualatex",
            lua("os.execute('kpsewhich article.cls') local g = gzip.open('/tmp/texfleet-shell-escape', 'rb') local z = zip.openfile('/tmp/texfleet-shell-escape') local ok, hb = pcall(require, 'luaharfbuzz') local b = ok and hb.Blob.new_from_file('/usr/share/perl5/Biber.pm') tex.print('libraries:' .. (g and 'allowed' or 'refused') .. '-' .. (z and 'allowed' or 'refused') .. '-' .. (b and 'allowed' or 'refused'))"), SUCCEEDS) },
        // C reads a name up to its NUL: "..\0" is `..` there.
        Case { text_contains: Some("nul:refused"), ..case("lua path with a nul byte", "lualatex",
            lua("local ok, d = pcall(lfs.dir, '/tmp/texmf-var/..' .. string.char(0)) tex.print('nul:' .. ((ok and type(d) == 'function') and 'allowed' or 'refused'))"), SUCCEEDS) },
        // access(2) is no read: Landlock does not check it.
        Case { text_contains: Some("readable:refused"), ..case("lua kpse readable_file as an oracle", "lualatex",
            lua("tex.print('readable:' .. (kpse.readable_file('/etc/hostname') and 'allowed' or 'refused'))"), SUCCEEDS) },
        // kpathsea's expand_path answers only folders that exist: every folder's oracle.
        Case { text_contains: Some("folders:[|]"), text_lacks: Some("proc"),
            ..case("lua kpse expand_path as an oracle", "lualatex",
                lua("tex.print('folders:[' .. kpse.expand_path('/proc/1') .. '|' .. kpse.new('mpost'):expand_path('/proc/1') .. ']')"), SUCCEEDS) },
        // The record of the shell escape is the driver's: a document can neither forge nor
        // erase it (the engine reaches it only through the descriptor the shell appends to).
        Case { log_contains: Some("texfleet-sh: refused"), log_lacks: Some("FORGED2"), ..case("luatex forging the shell escape record", "lualatex",
            doc("\\directlua{os.execute('kpsewhich --version') luatexbase.add_to_callback('find_write_file', function(n, name) if name:find('forge') then return '/tmp/texfleet-shell-escape' end return name end, 'w')}\\newwrite\\w\\immediate\\openout\\w=forge.txt \\immediate\\write\\w{texfleet-sh: ran \"latexminted FORGED\\the\\numexpr1+1\\relax\"}\\immediate\\closeout\\w"), ANY_END) },
        Case { text_contains: Some("chdir:refused"), ..case("lua chdir to the root", "lualatex",
            lua("local ok = lfs.chdir('/') local f = io.open('etc/passwd') tex.print('chdir:' .. ((ok or f) and 'allowed' or 'refused'))"), SUCCEEDS) },
        // Files Landlock allows every program (all of /usr) but the Lua sandbox does not.
        Case { text_contains: Some("pdfobj:refused"), ..case("lua pdf object from a file", "lualatex",
            lua("local ok, e = pcall(pdf.immediateobj, 'file', '/usr/share/perl5/Biber.pm') tex.print('pdfobj:' .. (tostring(e):find('sandbox') and 'refused' or 'allowed'))"), SUCCEEDS) },
        Case { text_contains: Some("img:refused"), ..case("lua image object renamed before its scan", "lualatex",
            lua("local i = img.new() i.filename = '/usr/share/perl5/Biber.pm' local ok, e = pcall(img.scan, i) tex.print('img:' .. (tostring(e):find('sandbox') and 'refused' or 'allowed'))"), SUCCEEDS) },
        Case { text_contains: Some("mplib:refused"), ..case("lua metapost input by absolute path", "lualatex",
            lua("local mp = mplib.new({ini_version = true}) local r = mp:execute('input /usr/share/perl5/Biber.pm;') tex.print('mplib:' .. (tostring(r.term):find('open file') and 'refused' or 'allowed'))"), SUCCEEDS) },
        // Lua stays Lua: no bytecode it did not make itself, no C, no way back to the originals.
        Case { text_contains: Some("bytecode:refused"), ..case("lua crafted bytecode", "lualatex",
            lua("local f = load('\\string\\27Lua' .. string.char(84, 0, 25, 147) .. string.rep('x', 60)) tex.print('bytecode:' .. (f and 'loaded' or 'refused'))"), SUCCEEDS) },
        Case { text_contains: Some("bytecode-file:refused"), ..case("lua bytecode from a file", "lualatex",
            lua("local h = io.open('bc.lua', 'wb') h:write(string.dump(function() return 1 end)) h:close() local f = loadfile('bc.lua') tex.print('bytecode-file:' .. (f and 'loaded' or 'refused'))"), SUCCEEDS) },
        Case { text_contains: Some("debug:nil-nil-nil"), ..case("lua debug library", "lualatex",
            lua("tex.print('debug:' .. tostring(debug.getupvalue) .. '-' .. tostring(debug.setupvalue) .. '-' .. tostring(debug.getregistry))"), SUCCEEDS) },
        // MetaPost with no options, or options whose metatable swallows the sandbox's check.
        Case { text_lacks: Some("packageBiber"), ..case("lua metapost without options", "lualatex",
            lua("local mp = mplib.new() local r = mp:execute('string s; s := readfrom \"/usr/share/perl5/Biber.pm\"; show s;') tex.print(-2, 'mp:' .. tostring(r and r.term))"), SUCCEEDS) },
        Case { text_lacks: Some("packageBiber"), ..case("lua metapost options that swallow the check", "lualatex",
            lua("local mp = mplib.new(setmetatable({ini_version = true}, {__newindex = function() end})) local r = mp:execute('string s; s := readfrom \"/usr/share/perl5/Biber.pm\"; show s;') tex.print(-2, 'mp:' .. tostring(r and r.term))"), SUCCEEDS) },
        // A feature or AFM file is read by the name given second.
        Case { text_contains: Some("featurefile:refused"), ..case("lua fontloader feature file outside the trees", "lualatex",
            lua("local f = fontloader.open('/usr/share/texmf/fonts/opentype/public/lm/lmroman10-regular.otf') local a, b = fontloader.apply_featurefile(f, '/etc/passwd') tex.print('featurefile:' .. ((a == nil and tostring(b):find('refused')) and 'refused' or 'read'))"), SUCCEEDS) },
        // luaotfload runs the Lua its configuration names when the job starts, before the
        // document's first line: a configuration of the work folder is never read, by any of
        // the names kpathsea finds it by.
        Case { files: json!([
                { "path": "luaotfloadrc.tex", "content": "[run]\nlog-level = 5\nfontloader = planted.lua\n" },
                { "path": "planted.lua", "content": "texio.write_nl('PLANTED-FONTLOADER-RAN') fonts = fonts or {}" }]),
            log_lacks: Some("planted.lua"),
            ..case("luaotfload configuration of the work folder with a tex suffix", "lualatex", doc("Hello"), ANY_END) },
        Case { files: json!([
                { "path": "luaotfload.conf", "content": "[run]\nfontloader = planted.lua\n" },
                { "path": "planted.lua", "content": "texio.write_nl('PLANTED-FONTLOADER-RAN') fonts = fonts or {}" }]),
            log_lacks: Some("PLANTED-FONTLOADER-RAN"),
            ..case("luaotfload configuration of the work folder", "lualatex", doc("Hello"), ANY_END) },
        // The format's code runs at \everyjob, before the document's first line, and requires
        // its modules by name: those of the work folder are not the format's. The document's
        // own modules load as usual.
        Case { files: json!([
                { "path": "ltluatex.lua", "content": "texio.write_nl('PLANTED-MODULE-RAN') texfleet_sandbox_finish = function() end" },
                { "path": "ownmodule.lua", "content": "return { word = 'OWN-MODULE-LOADED' }" }]),
            log_lacks: Some("PLANTED-MODULE-RAN"), text_contains: Some("OWN-MODULE-LOADED"),
            ..case("lua module of the work folder before the first line", "lualatex",
                lua("tex.print(require('ownmodule').word)"), SUCCEEDS) },
        Case { text_contains: Some("loadlib:nil-nil"), ..case("lua C modules", "lualatex",
            lua("tex.print('loadlib:' .. tostring(package.loadlib) .. '-' .. tostring(package.searchers[3]))"), SUCCEEDS) },
        Case { text_contains: Some("exec:nil-nil-nil"), ..case("lua commands without the shell", "lualatex",
            lua("tex.print('exec:' .. tostring(os.exec) .. '-' .. tostring(os.spawn) .. '-' .. tostring(os.execute('id')))"), SUCCEEDS) },
        // The restricted shell escape: kpathsea's list, then the restricted shell's checks.
        // Refusals long enough to fill the shell's record do not hide what runs after them.
        Case { log_contains: Some("texfleet-sh: ran \"kpsewhich 'article.cls'\""), ..case("shell escape record flooded by long refusals", "pdflatex",
            doc(&format!("\\def\\x{{aaaaaaaaaa}}\\edef\\x{{{ten}}}\\edef\\x{{{ten}}}\\edef\\x{{{ten}}}\\edef\\x{{\\x\\x\\x\\x\\x}}{floods}\\immediate\\write18{{kpsewhich article.cls}}",
                ten = "\\x".repeat(10), floods = "\\immediate\\write18{kpsewhich /\\x}".repeat(6))), SUCCEEDS) },
        Case { log_contains: Some("texfleet-sh: refused"), text_lacks: Some("usr/bin"), ..case("kpsewhich reading the environment", "pdflatex",
            doc("[\\input|\"kpsewhich -var-value=PATH\" ]"), SUCCEEDS) },
        Case { log_contains: Some("texfleet-sh: refused"), text_lacks: Some("usr/bin"), ..case("kpsewhich reading the environment from lua", "lualatex",
            lua("local p = io.popen('kpsewhich --expand-var=$PATH') tex.print('popen:' .. (p and p:read('*a') or 'nil'))"), SUCCEEDS) },
        Case { log_contains: Some("texfleet-sh: refused"), ..case("kpsewhich finding a file outside the job", "pdflatex",
            doc("[\\input|\"kpsewhich /etc/passwd\" ]"), SUCCEEDS) },
        Case { log_contains: Some("texfleet-sh: refused"), text_lacks: Some("etc/passwd"), ..case("kpsewhich finding a file outside the job by a variable", "pdflatex",
            doc("[\\input|\"kpsewhich $SELFAUTOPARENT/etc/passwd\" ]"), SUCCEEDS) },
        Case { text_contains: Some("kpse:nil-nil-nil"), ..case("lua kpathsea finding a file outside the trees", "lualatex",
            lua("local k = kpse.new('mpost') tex.print('kpse:' .. tostring(kpse.find_file('$SELFAUTOPARENT/etc/passwd')) .. '-' .. tostring(kpse.find_file('/etc/hostname')) .. '-' .. tostring(k:find_file('/etc/passwd')))"), SUCCEEDS) },
        Case { text_contains: Some("kpse:nil-nil-nil-nil"), ..case("lua kpathsea finding a file by a parent path", "lualatex",
            lua("local k = kpse.new('luatex') tex.print('kpse:' .. tostring(kpse.find_file('../etc/hostname', 'tex')) .. '-' .. tostring(kpse.readable_file('./../etc/passwd')) .. '-' .. tostring(kpse.lookup('../proc/self/status', { format = 'tex' })) .. '-' .. tostring(k:find_file('../etc/hostname', 'tex')))"), SUCCEEDS) },
        Case { text_contains: Some("lookup:nil-nil-nil"), ..case("lua kpathsea lookup in folders of its own", "lualatex",
            lua("tex.print('lookup:' .. tostring(kpse.lookup('passwd', { path = '/etc' })) .. '-' .. tostring(kpse.lookup('hostname', { path = 'x:$SELFAUTOPARENT/etc' })) .. '-' .. tostring(kpse.new('luatex'):lookup('passwd', { path = '/etc' })))"), SUCCEEDS) },
        Case { log_contains: Some("disabled"), ..case("an allowed program by its path", "pdflatex",
            doc("\\immediate\\write18{/usr/bin/kpsewhich -var-value=PATH > k.tex}"), SUCCEEDS) },
        Case { text_lacks: Some("PWNED"), ..case("shell metacharacters in an allowed command", "pdflatex",
            doc("\\immediate\\write18{kpsewhich \"x;echo PWNED>pwned-1.tex\" `id>pwned-2.tex` $(id>pwned-3.tex)}\\IfFileExists{pwned-1.tex}{PWNED}{}\\IfFileExists{pwned-2.tex}{PWNED}{}\\IfFileExists{pwned-3.tex}{PWNED}{}"), SUCCEEDS) },
        Case { log_contains: Some("texfleet-sh: refused"), ..case("latexminted asked for another file", "pdflatex",
            doc("\\immediate\\write18{latexminted batch --timestamp 20250101000000Z /etc/passwd}"), SUCCEEDS) },
        Case { log_contains: Some("texfleet-sh: refused"), ..case("l3sys-query listing outside the job", "pdflatex",
            doc("[\\input|\"l3sys-query ls /etc\" ]"), SUCCEEDS) },
        Case { timeout: TOOLS_TIMEOUT, ..case("minted reading outside the job", "pdflatex",
            "\\documentclass{article}\\usepackage{minted}\\begin{document}\\inputminted{text}{/etc/passwd}\\inputminted{text}{../../etc/passwd}x\\end{document}".into(), ANY_END) },
        // latexminted runs a project's lexer only when a configuration file names it with its
        // hash, in a dot file (which neither a request nor TeX can write) of HOME or TEXMFHOME
        // (neither of which is the work folder).
        Case { timeout: TOOLS_TIMEOUT, files: json!([
                { "path": "lexer.py", "content": "open('leak.tex', 'w').write('uid=lexer ran')\nfrom pygments.lexer import RegexLexer\nclass EvilLexer(RegexLexer):\n    tokens = {'root': []}\n" }]),
            ..case("minted with a lexer of the project", "pdflatex",
            "\\documentclass{article}\\usepackage{minted}\\begin{document}\\begin{minted}{lexer.py:EvilLexer -x}\nx\n\\end{minted}\\IfFileExists{leak.tex}{\\input{leak.tex}}{}x\\end{document}".into(), ANY_END) },
        Case { text_contains: Some("no-socket"), ..case("lua socket", "lualatex",
            lua("local ok = pcall(require, 'socket') tex.print(ok and 'socket-loaded' or 'no-socket')"), SUCCEEDS) },
        // Environment leaks.
        Case { text_contains: Some("ENV=nil"), ..case("lua getenv", "lualatex",
            lua("tex.print('ENV=' .. tostring(os.getenv('CANARY_SECRET')))"), SUCCEEDS) },
        case("kpathsea variable", "lualatex", lua("tex.print(-2, tostring(kpse.var_value('CANARY_SECRET')))"), SUCCEEDS),
        case("dollar expansion in a file name", "pdflatex", doc("\\input{$CANARY_SECRET}"), COMPILE_ERROR),
        // Writes outside the work directory.
        Case { log_contains: Some("write on file"), ..case("openout absolute", "pdflatex",
            doc("\\newwrite\\w\\immediate\\openout\\w=/tmp/evil.tex\\immediate\\write\\w{x}\\immediate\\closeout\\w"), COMPILE_ERROR) },
        Case { log_contains: Some("write on file"), ..case("openout traversal", "pdflatex",
            doc("\\newwrite\\w\\immediate\\openout\\w=../evil.tex\\immediate\\write\\w{x}\\immediate\\closeout\\w"), COMPILE_ERROR) },
        // Ghostscript, converting EPS under -dSAFER with caps of its own.
        Case { files: eps_figure("(/etc/passwd) (r) file 100 string readstring pop show"),
            ..case("eps reads a file", "pdflatex", with_figure(), SUCCEEDS) },
        // A file Landlock lets every program read: only -dSAFER keeps Ghostscript from it.
        Case { files: eps_figure("(/usr/share/texlive/texmf-dist/tex/latex/base/article.cls) (r) file 200 string readstring pop show"),
            text_lacks: Some("Thisisfile"), ..case("eps reads a TeX file", "pdflatex", with_figure(), SUCCEEDS) },
        Case { files: eps_figure("(%pipe%id) (r) file 100 string readstring pop show"),
            ..case("eps pipe", "pdflatex", with_figure(), SUCCEEDS) },
        // SAFER lets Ghostscript read and write its temporary folder: one of its own.
        Case { files: eps_figure("{ (/tmp/texfleet-planted) (w) file dup (PLANTED) writestring closefile } stopped pop \
            { (/tmp/texfleet-planted) (r) file 7 string readstring pop show } stopped pop"),
            text_lacks: Some("PLANTED"), ..case("eps writes the driver's tmp", "pdflatex", with_figure(), SUCCEEDS) },
        Case { files: eps_figure("{ } loop"), log_contains: Some("ran gs"),
            ..case("eps endless loop", "pdflatex", with_figure(), SUCCEEDS) },
        // 600 MB: within the container's memory, beyond Ghostscript's own 512 MiB cap, so only
        // the cap keeps the figure (and its word) out.
        Case { files: eps_figure("/a 600000000 string def (ALLOCATED) show"), log_contains: Some("ran gs"),
            text_lacks: Some("ALLOCATED"),
            ..case("eps memory bomb", "pdflatex", with_figure(), SUCCEEDS) },
        // Open files: the supervisor's limit of 256, as TeX sees it.
        Case { text_contains: Some("open-files-capped"), ..case("open files flood", "lualatex",
            lua("local n, keep = 0, {} for i = 1, 1000 do local f = io.open('f' .. i .. '.txt', 'w') if not f then break end keep[i] = f n = n + 1 end for _, f in ipairs(keep) do f:close() end tex.print(n < 256 and 'open-files-capped' or 'uncapped ' .. n)"), SUCCEEDS) },
        // Exhaustion and floods.
        case("cpu loop", "pdflatex", "\\loop\\iftrue\\repeat".into(), &[("TimedOut", Some("timeout"))]),
        case("memory bomb", "lualatex",
            lua("local t = {} for i = 1, 1000 do t[i] = string.rep('x', 67108864 + i) end"), &[("Failed", Some("memory_limit"))]),
        case("tex memory", "pdflatex", doc("\\def\\a{x\\a}\\edef\\b{\\a}"), COMPILE_ERROR),
        Case { timeout: FLOOD_TIMEOUT, ..case("log flood", "pdflatex", doc(&format!("\\loop\\message{{{filler}}}\\iftrue\\repeat")), OUTPUT_LIMIT) },
        Case { timeout: FLOOD_TIMEOUT, ..case("disk flood", "pdflatex",
            doc(&format!("\\newwrite\\w\\immediate\\openout\\w=big.txt \\loop\\immediate\\write\\w{{{filler}}}\\iftrue\\repeat")), OUTPUT_LIMIT) },
        Case { timeout: FLOOD_TIMEOUT, ..case("file count flood", "pdflatex",
            doc("\\newcount\\n\\newwrite\\w\\loop\\immediate\\openout\\w=f\\the\\n.txt\\immediate\\closeout\\w\\advance\\n1 \\iftrue\\repeat"), OUTPUT_LIMIT) },
        Case { timeout: FLOOD_TIMEOUT, ..case("runaway pages", "pdflatex",
            doc(&format!("\\pdfcompresslevel=0 \\pdfobjcompresslevel=0 \\loop {} \\newpage\\iftrue\\repeat", "lorem ipsum ".repeat(150))), OUTPUT_LIMIT) },
    ];
    cases.extend(tool_cases());
    cases
}

/// The tools around the engine, and the files they would take from the work directory.
fn tool_cases() -> Vec<Case> {
    let biblatex = |resource: &str, preamble: &str| {
        format!("\\documentclass{{article}}\\usepackage[backend=biber]{{biblatex}}{preamble}\\addbibresource{{{resource}}}\\begin{{document}}\\nocite{{*}}x\\printbibliography\\end{{document}}")
    };
    let refs = json!([{ "path": "refs.bib", "content": "@book{x, title={Original Title}, author={Ann Author}, year={2020}}" }]);
    // What a pass of LuaTeX can do after a failure: write a PDF and a clean log, exit with 0.
    let forge = "luatexbase.add_to_callback('wrapup_run', function()
  local pdf = io.open('output.pdf', 'wb')
  pdf:write('%PDF-1.4\\n1 0 obj <</Type/Catalog/Pages 2 0 R>> endobj\\n2 0 obj <</Type/Pages/Kids[3 0 R]/Count 1>> endobj\\n3 0 obj <</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>> endobj\\ntrailer <</Root 1 0 R>>\\n%%EOF\\n')
  pdf:close()
  local log = io.open('output.log', 'w')
  log:write('This is LuaHBTeX\\nOutput written on output.pdf (1 page).\\n')
  log:close()
  os.exit(0)
end, 'forge')";
    // A bibliography outside the work folder, and biber pointed there by an option the
    // document adds to the control file.
    let hidden = "local bib = io.open('/tmp/hidden.bib', 'w') bib:write('@book{h, title={TMPDIR-ENTRY}, author={Ann Author}, year={2020}}') bib:close()";
    // A preamble that writes that bibliography and adds `option` to every options block.
    let with_option = |option: &str| {
        format!("\\directlua{{{hidden}}}\\makeatletter\\let\\texfleetopts\\blx@xml@options\\def\\blx@xml@options#1#2#3{{\\texfleetopts{{#1}}{{#2}}{{#3{option}}}}}\\makeatother")
    };
    let attribute_key = with_option("<bcf:option type=\"singlevalued\"><bcf:key content=\"input_directory\"/><bcf:value>/tmp</bcf:value></bcf:option>");
    let redirect = with_option("\\blx@xml@svalue{input_directory}{/tmp}");
    vec![
        // biber evaluated sourcemap replacements as Perl (s///ee): the image's biber is patched.
        Case { files: refs.clone(), text_contains: Some("BIBER-EVAL"), ..case("biber sourcemap replace runs Perl", "pdflatex",
            biblatex("refs.bib", "\\DeclareSourcemap{\\maps[datatype=bibtex]{\\map{\\step[fieldsource=title, match=\\regexp{Original}, replace={BIBER-EVAL: @{[qx(/usr/bin/id)]}}]}}}"), SUCCEEDS) },
        // biber reads the control file with namespaces stripped: any prefix names a data source.
        Case { log_contains: Some("skipped biber"), ..case("biber data source in another namespace", "pdflatex",
            biblatex("refs.bib", &format!("\\makeatletter\\def\\blx@xml@datasource#1#2#3#4#5{{<x:datasource xmlns:x=\"urn:x\" type=\"#1\" datatype=\"#2\">{XAMPL}.bib</x:datasource>\\blx@nl}}\\makeatother")), SUCCEEDS) },
        // biber takes its options from the control file unless given on its command line:
        // input_directory would make a plain data source name read from anywhere.
        Case { log_contains: Some("skipped biber"), text_lacks: Some("TMPDIR-ENTRY"), timeout: TOOLS_TIMEOUT,
            ..case("biber option added to the control file", "lualatex", biblatex("hidden.bib", &redirect), SUCCEEDS) },
        Case { log_contains: Some("skipped biber"), text_lacks: Some("TMPDIR-ENTRY"), timeout: TOOLS_TIMEOUT,
            ..case("biber option as an attribute of an empty key", "lualatex", biblatex("hidden.bib", &attribute_key), SUCCEEDS) },
        // xindy's styles are Lisp, which the document writes; clisp's FFI and ext:execute make
        // them native code and commands (also through the ELF loader, past a Landlock exec
        // rule): xindy is never run.
        Case { files: json!([{ "path": "evil.xdy", "content": "(ext:execute \"/lib64/ld-linux-x86-64.so.2\" \"/usr/bin/id\")\n(ext:exit 1)\n" }]),
            log_contains: Some("skipped xindy"), timeout: TOOLS_TIMEOUT, ..case("xindy style runs a program", "pdflatex",
            doc("\\makeatletter\\immediate\\write\\@auxout{\\string\\@newglossary{main}{glg}{gls}{glo}}\\immediate\\write\\@auxout{\\string\\@istfilename{evil.xdy}}\\makeatother\\newwrite\\w\\immediate\\openout\\w=output.glo \\immediate\\write\\w{(indexentry :tkey ((\"a\")) :locref \"1\")}\\immediate\\closeout\\w\\IfFileExists{pwned.tex}{\\input{pwned.tex}}{\\typeout{Rerun to get the command's output}}"), SUCCEEDS) },
        // bib2gls's TeX interpreter \inputs any path, past openin_any: only Landlock bounds it.
        Case { files: json!([{ "path": "terms.bib", "content": "@entry{c, name={c}, description={CCC\\input{/etc/passwd}ZZZ}}\n@entry{d, name={d}, description={DDD\\input{/proc/self/mountinfo}ZZZ}}\n" }]),
            log_contains: Some("ran java"), timeout: TOOLS_TIMEOUT, ..case("bib2gls interpreter inputs a file by absolute path", "pdflatex",
            "\\documentclass{article}\\usepackage[record]{glossaries-extra}\\GlsXtrLoadResources[src={terms},interpret-fields={description},selection={all}]\\begin{document}x\\printunsrtglossaries\\end{document}".into(), ANY_END) },
        // biber parses biblatexml data files with external entities on.
        Case { files: json!([{ "path": "refs.bltxml", "content": format!("<?xml version=\"1.0\"?>\n<!DOCTYPE e [<!ENTITY x SYSTEM \"file://{CNF}\">]>\n<bltx:entries xmlns:bltx=\"http://biblatex-biber.sourceforge.net/biblatexml\"><bltx:entry id=\"x\" entrytype=\"misc\"><bltx:names type=\"author\"><bltx:name><bltx:namepart type=\"family\">Author</bltx:namepart></bltx:name></bltx:names><bltx:title>&x;</bltx:title></bltx:entry></bltx:entries>\n") }]),
            log_contains: Some("skipped biber"), text_lacks: Some(CNF_MARKER),
            ..case("biblatexml data file with an external entity", "pdflatex",
            "\\documentclass{article}\\usepackage[backend=biber]{biblatex}\\addbibresource[datatype=biblatexml]{refs.bltxml}\\begin{document}\\nocite{*}x\\printbibliography\\end{document}".into(), SUCCEEDS) },
        // kpathsea searches no tree the document can write: not TEXMFHOME, not the work folder.
        Case { files: json!([{ "path": "texmf/tex/latex/zzz/zzzpkg.sty", "content": "\\def\\zzzmsg{TEXMFHOME-LOADED}" }]),
            text_contains: Some("texmfhome-refused"), ..case("package from a TEXMFHOME in the work folder", "pdflatex",
            doc("\\IfFileExists{zzzpkg.sty}{\\input{zzzpkg.sty}\\zzzmsg}{texmfhome-refused}"), SUCCEEDS) },
        Case { files: json!([{ "path": "pdflatex.fmt", "content": "not a format" }]), text_contains: Some("format-kept"),
            ..case("pdflatex format from the work folder", "pdflatex", doc("format-kept"), SUCCEEDS) },
        Case { files: json!([{ "path": "lualatex.fmt", "content": "not a format" }]), text_contains: Some("format-kept"),
            ..case("lualatex format from the work folder", "lualatex", doc("format-kept"), SUCCEEDS) },
        // xdvipdfmx runs its configuration's conversion command without a shell (D "...").
        Case { files: json!([
                { "path": "dvipdfmx.cfg", "content": "D \"perl x.pl %o %i\"\n" },
                { "path": "x.pl", "content": "open(my $f, '>>', 'output.log'); print $f \"DVIPDFMX-RAN-PERL\\n\";" },
                { "path": "fig.eps", "content": "%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n" }]),
            log_lacks: Some("DVIPDFMX-RAN-PERL"), ..case("dvipdfmx configuration from the work folder", "xelatex", with_figure(), ANY_END) },
        // The verdict under halt_on_error rests on the engine's exit status, not on the log.
        Case { files: json!([{ "path": "forge.lua", "content": forge }]), halt_on_error: true,
            ..case("lua forges success after an error", "lualatex", doc("\\directlua{dofile('forge.lua')}\\undefinedcommand"), COMPILE_ERROR) },
    ]
    .into_iter()
    .chain(forged_pdf_cases())
    .collect()
}

/// What counts as the PDF. Under XeTeX only xdvipdfmx writes it, so a file of that name the
/// document wrote while typesetting nothing must not come out; under every engine, a last pass
/// without a page must not leave an earlier pass's PDF as the result. (Under pdfTeX and LuaTeX
/// the document may write the PDF's bytes itself, as it may through `\pdfliteral`: SECURITY.md.)
fn forged_pdf_cases() -> Vec<Case> {
    const PDF: &str = "%PDF-1.4 1 0 obj <</Type/Catalog/Pages 2 0 R>> endobj 2 0 obj <</Type/Pages/Kids[3 0 R]/Count 1>> endobj 3 0 obj <</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>> endobj trailer <</Root 1 0 R>> %%EOF";
    let tex = format!("\\documentclass{{article}}\\begin{{document}}{{\\catcode`\\%=12 \\newwrite\\w\\immediate\\openout\\w=output.pdf \\immediate\\write\\w{{{PDF}}}\\immediate\\closeout\\w}}\\end{{document}}");
    let first_pass_only = "\\documentclass{article}\\begin{document}\\makeatletter\\@ifundefined{r@second}{first pass page\\label{second}}{}\\end{document}";
    vec![
        Case {
            log_contains: Some("not the engine's"),
            ..case(
                "openout forges the PDF of xelatex",
                "xelatex",
                tex,
                COMPILE_ERROR,
            )
        },
        // The pass that checks a new preamble format gives the PDF when the format is kept:
        // under XeTeX, xdvipdfmx must write it there too (this document's format defines a
        // macro that makes that pass write its own PDF of the same pages, and a hidden text).
        Case {
            text_lacks: Some("FORGED-NOT-WRITTEN-BY-XDVIPDFMX"),
            ..case(
                "the format's pass writes the PDF of xelatex",
                "xelatex",
                include_str!("format_pass_writes_the_pdf.tex").to_string(),
                SUCCEEDS,
            )
        },
        case(
            "a last pass without a page keeps no earlier PDF",
            "pdflatex",
            first_pass_only.to_string(),
            COMPILE_ERROR,
        ),
    ]
}
