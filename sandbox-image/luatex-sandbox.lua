-- texfleet: the compile driver starts every LuaTeX job with this file as its startup script
-- (`lualatex --lua=<this file>`), so that it runs before the format and every package, which
-- then capture only the functions it leaves; and with `\directlua{texfleet_sandbox_finish()}`
-- as the first line, before any line of the document, because LuaTeX re-installs C module
-- loading and io.popen after the startup script. The document's Lua code, and that of every
-- package, sees only what this leaves:
--
-- 1. Lua stays Lua. Lua has no bytecode verifier, and crafted bytecode is a known road from
--    Lua to native code, so every way to load a chunk (load, loadstring, loadfile, dofile,
--    require) takes text only, with one exception that cannot be crafted: bytecode that
--    string.dump made in this very run from a function (lualibs compiles its formatters that
--    way). C modules cannot be loaded at all. `debug` keeps only `traceback` and a `getinfo` without
--    functions, so nothing can reach the originals kept below.
-- 2. Lua opens, lists and changes files only below the TeX trees, the fonts, the per-job
--    caches and the work directory, and so does TeX itself when it reads a file by name.
--    Landlock enforces much the same for every program of the compile; this is the same rule
--    one layer up, narrower in /tmp, and the only one where Landlock is absent.
--
-- Lua's os.execute and io.popen go through kpathsea's restricted shell escape, as \write18
-- does: kpathsea allows only the commands of shell_escape_commands, and the image's /bin/sh
-- (not a shell) only their usual arguments. os.exec and os.spawn are removed: they check the
-- program's name only, and start it without the shell. os.exit always exits with a failure
-- (see remove_native_code).

local image_trees = {
  "/usr/share/texlive/", "/usr/share/texmf/", "/usr/share/fonts/", "/usr/share/texfleet/",
  "/var/lib/texmf/", "/etc/texmf/", "/etc/fonts/",
}
local allowed = { "/work/", "/tmp/texmf-var/" }
for _, tree in ipairs(image_trees) do allowed[#allowed + 1] = tree end
-- Until the job's first line has finished the sandbox, Lua code is loaded from the image only:
-- the format's code runs at \everyjob, before that line, and requires its modules by name,
-- which kpathsea finds in the work folder first (an uploaded ltluatex.lua would run there and
-- could undo what the first line does).
local finished = false

local lfs, kpse, io, os, package, debug = lfs, kpse, io, os, package, debug
local type, select, error, tostring, concat = type, select, error, tostring, table.concat
local original = {
  load = load, loadstring = loadstring, dump = string.dump, loadfile = loadfile, open = io.open, lines = io.lines, input = io.input,
  output = io.output, remove = os.remove, rename = os.rename, currentdir = lfs.currentdir, exit = os.exit,
  traceback = debug.traceback, getinfo = debug.getinfo, kpsepopen = os.kpsepopen,
}

-- The absolute, normalised form of `path`, or nil when it has a `..` component or a NUL (C
-- reads a name only up to it: "..\0" would be `..` there).
local function absolute(path)
  if path:find("\0", 1, true) then return nil end
  if path:sub(1, 1) ~= "/" then
    path = (original.currentdir() or "") .. "/" .. path
  end
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." then return nil end
    if part ~= "." then parts[#parts + 1] = part end
  end
  return "/" .. concat(parts, "/")
end

local function below(path, prefixes)
  local full = absolute(path)
  if not full then return false end
  for _, prefix in ipairs(prefixes) do
    if full .. "/" == prefix or full:sub(1, #prefix) == prefix then return true end
  end
  return false
end

-- luaotfload reads its configuration (fonts, caches, the Lua of its `fontloader`) when the
-- job starts, before the job's first line can finish the sandbox (below), by names kpathsea
-- also finds with a suffix (`luaotfloadrc.tex`): only the image's own files of such names may
-- be read. (Its caches, `luaotfload-names.lua` and the like, are the job's.)
local CONFIGURATIONS = { "luaotfload.conf", "luaotfloadrc", ".luaotfloadrc" }
local function foreign_configuration(path)
  if path:sub(1, 5) == "/usr/" then return false end
  local name = path:match("([^/]*)$"):lower()
  for _, configuration in ipairs(CONFIGURATIONS) do
    if name:sub(1, #configuration) == configuration then return true end
  end
  return false
end

local function permitted(path)
  if type(path) ~= "string" then return true end -- a file handle, or nothing
  return below(path, allowed) and not foreign_configuration(path)
end

local function refused(path)
  return nil, tostring(path) .. ": refused by the sandbox"
end

-- Calls `f` with the arguments as given, so that an explicit nil stays explicit (load's env).
local function guard(f)
  return function(path, ...)
    if not permitted(path) then
      return refused(path)
    end
    return f(path, ...)
  end
end

io.open = guard(original.open)
io.lines = function(path, ...)
  if path ~= nil and not permitted(path) then error(select(2, refused(path)), 2) end
  return original.lines(path, ...)
end
io.input = function(file) if not permitted(file) then error(select(2, refused(file)), 2) end return original.input(file) end
io.output = function(file) if not permitted(file) then error(select(2, refused(file)), 2) end return original.output(file) end
os.remove = guard(original.remove)
os.rename = function(from, to)
  if not (permitted(from) and permitted(to)) then return refused(from) end
  return original.rename(from, to)
end
-- Whether `path` is a folder above an allowed one ("/usr"): asking whether it exists tells
-- nothing, and luaotfload walks up paths that way.
local function ancestor(path)
  local full = absolute(path)
  if not full then return false end
  for _, prefix in ipairs(allowed) do
    if prefix:sub(1, #full + 1) == full .. "/" or full == "/" then return true end
  end
  return false
end
for _, name in ipairs({ "attributes", "symlinkattributes", "isdir", "isfile" }) do
  local f = lfs[name]
  if f then
    lfs[name] = function(path, ...)
      if type(path) == "string" and not permitted(path) and not ancestor(path) then
        return refused(path)
      end
      return f(path, ...)
    end
  end
end
for _, name in ipairs({ "dir", "chdir", "mkdir", "rmdir", "touch", "link", "readlink",
                        "setmode", "lock_dir" }) do
  if lfs[name] then lfs[name] = guard(lfs[name]) end
end
-- Guards the functions `names` of `library` (which may be absent) that take a file name first.
local function guard_library(library, names)
  if type(library) ~= "table" then return end
  for _, name in ipairs(names) do
    if type(library[name]) == "function" then library[name] = guard(library[name]) end
  end
end
guard_library(fontloader, { "open", "info", "new" })
-- Feature and AFM files are read by the name given second (fontloader.apply_featurefile(font,
-- path)).
if type(fontloader) == "table" then
  for _, name in ipairs({ "apply_featurefile", "apply_afmfile" }) do
    local f = fontloader[name]
    if type(f) == "function" then
      fontloader[name] = function(font, path, ...)
        if not permitted(path) then return refused(path) end
        return f(font, path, ...)
      end
    end
  end
end
guard_library(epdf, { "open", "info", "new" })
guard_library(pdfe, { "open", "info", "new" })
-- zlib and zziplib open plain files too, by any name.
guard_library(gzip, { "open", "openfile", "lines" })
guard_library(zip, { "open", "openfile", "lines" })
-- HarfBuzz reads fonts by name; luaotfload's harf mode uses it for fonts in the TeX trees.
do
  local ok, hb = pcall(require, "luaharfbuzz")
  if ok and type(hb) == "table" then
    guard_library(hb.Blob, { "new_from_file" })
    guard_library(hb.Face, { "new" })
  end
end
-- Wraps each function `names` of `library` so that the file `file_of(...)` names, if any, is
-- checked first. The call keeps its arguments as given: img.new() and img.new(nil) differ.
local function guard_files(library, names, what, file_of)
  if type(library) ~= "table" then return end
  for _, name in ipairs(names) do
    local f = library[name]
    if f then
      library[name] = function(...)
        local file = file_of(...)
        if file ~= nil and not permitted(file) then
          error(what .. " " .. tostring(file) .. ": refused by the sandbox", 2)
        end
        return f(...)
      end
    end
  end
end
-- An image is a table or an image object (userdata) whose filename may be set at any time
-- before it is scanned; every function that takes one checks the name it holds then.
guard_files(img, { "new", "scan", "copy", "write", "immediatewrite", "immediatewritexform",
                   "node", "keep" }, "image", function(spec)
  if type(spec) ~= "table" and type(spec) ~= "userdata" then return nil end
  local ok, file = pcall(function() return spec.filename end)
  return ok and file or nil
end)
-- PDF objects from a file: pdf.obj([objnum,] "file", path), pdf.obj{file = path}, and the
-- immediate ones.
guard_files(pdf, { "obj", "immediateobj" }, "pdf object from", function(...)
  local args = { ... }
  local first = type(args[1]) == "number" and 2 or 1
  local kind = args[first]
  if kind == "file" or kind == "streamfile" then return args[first + 1] end
  if type(kind) == "table" then return kind.file end
end)
-- MetaPost opens what its find_file callback answers with C's fopen, and the name as given
-- when there is none: the answer is checked either way.
-- MetaPost gets a plain table of its own whatever it was given (none, or one whose metatable
-- would swallow the check), since LuaTeX reads the options raw.
if type(mplib) == "table" and mplib.new then
  local new = mplib.new
  mplib.new = function(given, ...)
    local spec = {}
    if type(given) == "table" then
      for key, value in next, given do rawset(spec, key, value) end
    end
    local theirs = rawget(spec, "find_file")
    local find = type(theirs) == "function" and theirs or function(name) return name end
    rawset(spec, "find_file", function(...)
      local file = find(...)
      if type(file) == "string" and not permitted(file) then return nil end
      return file
    end)
    return new(spec, ...)
  end
end

-- Bytecode string.dump made in this run: the VM's own output, never crafted.
local dumped = {}
string.dump = function(...)
  local code = original.dump(...)
  dumped[code] = true
  return code
end

-- Text chunks, or bytecode this run dumped. A reader function is drained here, so that it
-- never runs inside the original load.
local function text_load(chunk, name, mode, ...)
  if type(chunk) == "function" then
    local pieces = {}
    while true do
      local piece = chunk()
      if piece == nil or piece == "" then break end
      pieces[#pieces + 1] = piece
    end
    chunk = concat(pieces)
  end
  mode = dumped[chunk] and "b" or "t"
  if select("#", ...) > 0 then
    return original.load(chunk, name, mode, ...)
  end
  return original.load(chunk, name, mode)
end

local function loadable(path)
  return permitted(path) and (finished or below(path, image_trees))
end

local function text_loadfile(path, mode, ...)
  if path ~= nil and not loadable(path) then return refused(path) end
  if select("#", ...) > 0 then
    return original.loadfile(path, "t", ...)
  end
  return original.loadfile(path, "t")
end

-- kpathsea answers whether a file exists for a name that leaves the trees Lua may read: an
-- absolute one, a parent path (`../etc/hostname` from the work folder), or one it expands
-- into either ($SELFAUTOPARENT is /, ~ the home, !! a path element): an oracle of the image's
-- files. Such names are not found; every other lookup is as kpathsea makes it.
local function kpse_name_permitted(name)
  if type(name) ~= "string" then return true end
  for _, expanded in ipairs({ "$", "\0", "!!" }) do
    if name:find(expanded, 1, true) then return false end
  end
  if name:sub(1, 1) == "/" then return permitted(name) end
  -- A relative name without a `..` stays in the work folder and the trees kpathsea searches.
  return name:sub(1, 1) ~= "~" and absolute(name) ~= nil
end
-- lookup's `path` option names the folders kpathsea searches (`{ path = "/etc" }`): each must be
-- one a name could be.
local function kpse_options_permitted(options)
  if type(options) ~= "table" or options.path == nil then return true end
  if type(options.path) ~= "string" then return false end
  for folder in options.path:gmatch("[^:]*") do
    if folder == "" or not kpse_name_permitted(folder) then return false end
  end
  return true
end
local function guard_kpse_lookup(f)
  return function(name, options, ...)
    if not (kpse_name_permitted(name) and kpse_options_permitted(options)) then return nil end
    return f(name, options, ...)
  end
end
-- readable_file asks access(2), which Landlock does not check: an oracle of every file.
local kpse_lookups = { find_file = true, lookup = true, readable_file = true }
for name in pairs(kpse_lookups) do
  if kpse[name] then kpse[name] = guard_kpse_lookup(kpse[name]) end
end
-- expand_path answers only the folders that exist, an oracle of every folder (a review told
-- the host's kernel modules from /sys/module): it keeps the folders Lua may read.
local function readable_folders(expanded)
  if type(expanded) ~= "string" then return expanded end
  local kept = {}
  for folder in expanded:gmatch("[^:]+") do
    if permitted(folder) then kept[#kept + 1] = folder end
  end
  return concat(kept, ":")
end
local expand_path = kpse.expand_path
if expand_path then
  kpse.expand_path = function(...) return readable_folders(expand_path(...)) end
end
local kpse_new = kpse.new
kpse.new = function(...)
  local instance = kpse_new(...)
  return setmetatable({}, { __index = function(_, key)
    local method = instance[key]
    if type(method) ~= "function" then return method end
    if key == "expand_path" then
      return function(_, ...) return readable_folders(method(instance, ...)) end
    end
    if kpse_lookups[key] then
      local guarded = guard_kpse_lookup(function(name, ...) return method(instance, name, ...) end)
      return function(_, name, ...) return guarded(name, ...) end
    end
    return function(_, ...) return method(instance, ...) end
  end })
end

-- TeX's own reads by name: \input and \openin (find_read_file), images (find_image_file) and
-- files read whole, such as \pdfobj's (find_data_file). LuaTeX reads with openin_any = r, and
-- Landlock lets the compile read /tmp, where the driver keeps the job's tool output, shell
-- escape record and page renderings: the name these callbacks answer passes the same rule as
-- Lua's io.open. A package's own callback for them (through luatexbase, which calls
-- callback.register) is wrapped the same way, and removing it brings back ours.
local function checked(name)
  if type(name) == "string" and not permitted(name) then return nil end
  return name
end
-- A data file not found is opened by the name as written (\pdfextension obj file): refused,
-- it is a name that cannot be opened.
local function checked_data(name)
  return checked(name) or "/nonexistent/refused-by-the-sandbox"
end
local engine_reads = {
  find_read_file = function(_, name)
    -- TeX Live 2022's LuaTeX has no in_name_ok; the answer is checked below either way.
    if kpse.in_name_ok and not kpse.in_name_ok(name) then return nil end
    return checked(kpse.find_file(name, "tex", true))
  end,
  find_image_file = function(name) return checked(kpse.find_file(name, "tex", true)) end,
  find_data_file = function(name) return checked_data(kpse.find_file(name, "tex", true)) end,
}
local answer_check = { find_read_file = checked, find_image_file = checked, find_data_file = checked_data }
local register = callback.register
-- Without a function (nil, or false, which would leave TeX's own unchecked lookup), ours.
callback.register = function(name, f, ...)
  local ours = engine_reads[name]
  if ours and type(f) ~= "function" then
    f = ours
  elseif ours then
    local theirs, check = f, answer_check[name]
    f = function(...) return check(theirs(...)) end
  end
  return register(name, f, ...)
end
for name, f in pairs(engine_reads) do register(name, f) end

load = text_load
-- LuaTeX's loadstring is its own (the 5.1 call, which packages still use): kept, for text and
-- for bytecode this run dumped.
if original.loadstring then
  loadstring = function(chunk, ...)
    if type(chunk) == "string" and chunk:byte(1) == 27 and not dumped[chunk] then
      return nil, "attempt to load a binary chunk (refused by the sandbox)"
    end
    return original.loadstring(chunk, ...)
  end
end
loadfile = text_loadfile
dofile = function(path)
  local chunk, message = text_loadfile(path)
  if not chunk then error(message, 2) end
  return chunk()
end

-- The first of kpathsea's matches for `name` in the image's trees (lookup gives them all as
-- values).
local function image_module(name)
  for _, file in ipairs({ kpse.lookup(name, { format = "lua", all = true }) }) do
    if below(file, image_trees) then return file end
  end
end
-- require: Lua modules found by kpathsea or package.path, loaded as text; no C modules. Before
-- the job's first line, only the image's.
local function lua_searcher(name)
  local file
  if finished then
    file = kpse.find_file(name, "lua")
      or kpse.find_file((name:gsub("%.", "/")), "lua")
      or package.searchpath(name, package.path)
  else
    file = image_module(name) or image_module((name:gsub("%.", "/")))
  end
  if not file then
    return "\n\tno Lua module '" .. name .. "' (texfleet sandbox)"
  end
  local chunk, message = text_loadfile(file)
  if not chunk then error(message, 2) end
  return chunk, file
end
-- No C modules, no commands. LuaTeX re-installs C module loading and io.popen after this
-- startup script, so the job's first line calls texfleet_sandbox_finish to do it again.
local function remove_native_code()
  package.searchers = { package.searchers[1], lua_searcher }
  package.loadlib = nil
  package.cpath = ""
  -- os.execute and os.kpsepopen stay (LuaTeX makes io.popen the latter when shell escape is
  -- restricted): both go through kpathsea's check and the image's /bin/sh.
  os.exec, os.spawn = nil, nil
  io.popen = original.kpsepopen
  -- kpathsea makes no file on demand (texmf-hardening.cnf); Lua may not turn that back on.
  if kpse.set_maketex then kpse.set_maketex = function() end end
  -- A document may end the run, not choose how it ended: the verdict under halt_on_error
  -- rests on the engine's exit status, so an early exit is always a failed one.
  os.exit = function() original.exit(1) end
end
-- debug keeps a traceback and a getinfo without functions: the rest reads and changes any
-- function's upvalues, this script's originals among them.
-- (LuaTeX 1.16 and later hold the library back themselves unless started with --luadebug;
-- TeX Live 2022's 1.15 gives the whole of it.)
local function restrict_debug()
  debug = {
    traceback = original.traceback,
    getinfo = function(...)
      local info = original.getinfo(...)
      if type(info) == "table" then info.func = nil end
      return info
    end,
  }
  _G.debug = debug
  package.loaded.debug = debug
end
remove_native_code()
restrict_debug()
-- TeX Live 2022's LuaTeX installs the whole debug library again after this script, as it does
-- C module loading: both are taken away again by the job's first line.
function texfleet_sandbox_finish()
  remove_native_code()
  restrict_debug()
  finished = true
  texfleet_sandbox_finish = nil
end


