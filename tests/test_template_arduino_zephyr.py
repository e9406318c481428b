"""The arduino and zephyr project templates. Neither toolchain is here (no Arduino
core, no Zephyr tree, no network), so what can be checked is checked: for
kws_dscnn and vww_mobilenetv1_int8 on a Cortex-M0+ (a SAMD21 board file written
here) and a Cortex-M4F (nrf52840dk), the Arduino library's sources and sketch are
compiled with arm-none-eabi-gcc/g++ as an Arduino core would (its flags, the
sketch as C++ after `#include <Arduino.h>`, against a stand-in Arduino.h written
below), and the Zephyr module's and application's C against stand-ins of the
Zephyr headers it uses, with -std=c99 -Wall -Wextra -Werror; the Zephyr files
parse (module.yml as YAML, the CMake files run by `cmake -P` with Zephyr's
functions stubbed, which also checks every source they list exists). Nothing is
linked, nothing runs on a board: `arduino-cli compile` and `west build` never ran.
Names from a model never reach the files as code."""
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import mtvm
import mtvm.project
from mtvm.cli import main as cli
from mtvm.errors import MtvmError
from mtvm.target import Target
from mtvm.testing import have, models_dir

MODELS_DIR = models_dir()
MODELS = ("kws_dscnn", "vww_mobilenetv1_int8")

need_models = pytest.mark.skipif(not os.path.isdir(MODELS_DIR),
                                 reason="../shared/models missing")
need_arm_gcc = pytest.mark.skipif(not (have("arm-none-eabi-gcc") and have("arm-none-eabi-g++")),
                                  reason="arm-none-eabi-gcc/g++ not installed")
need_cmake = pytest.mark.skipif(not have("cmake"), reason="cmake not installed")

# A SAMD21 board (Arduino Zero, MKR): there is no such board file in boards/, and the
# arduino template needs only the cpu (the model's target) and the UART's baud rate.
SAMD21 = {
    "name": "samd21-arduino",
    "description": "test board: Microchip SAMD21G18 (Arduino Zero), Cortex-M0+, 256 KiB "
                   "flash, 32 KiB RAM",
    "template": "cortex_m", "emulated": False, "cpu": "cortex-m0plus", "dsp": False,
    "cflags": ["-mcpu=cortex-m0plus", "-mthumb"], "cc": "arm-none-eabi-gcc", "ldflags": [],
    "clock_hz": 48000000, "irqs": 32, "timer": "systick", "stack_bytes": 4096,
    "memory": {"flash": {"origin": "0x00000000", "size": "256K", "name": "flash"},
               "ram": {"origin": "0x20000000", "size": "32K", "name": "RAM"}},
    "uart": {"driver": "cmsdk_uart", "base": "0x42000800", "rx_irq": 9, "baud": 115200,
             "pclk_hz": 48000000},
    "runner": "pyocd", "runner_args": {"target": "atsamd21g18"},
    "usb": None, "max_packet_bytes": 512, "standalone_runs": 3,
}

# What the Arduino cores pass (platform.txt of ArduinoCore-samd and of Adafruit's nRF52
# core), with warnings on and -Werror added; the cpu flags are the board file's.
ARDUINO_COMMON = ["-c", "-g", "-Os", "-Wall", "-Wextra", "-Werror", "-ffunction-sections",
                  "-fdata-sections", "-nostdlib", "--param", "max-inline-insns-single=500",
                  "-DARDUINO=10819"]
ARDUINO_C = ["-std=gnu11"]
ARDUINO_CXX = ["-std=gnu++11", "-fno-threadsafe-statics", "-fno-rtti", "-fno-exceptions"]
ARDUINO_DEFINES = {"samd21-arduino": ["-DF_CPU=48000000L", "-DARDUINO_SAMD_ZERO",
                                      "-DARDUINO_ARCH_SAMD", "-D__SAMD21G18A__"],
                   "nrf52840dk": ["-DF_CPU=64000000", "-DARDUINO_NRF52840_FEATHER",
                                  "-DARDUINO_ARCH_NRF52", "-DNRF52840_XXAA", "-mabi=aapcs"]}

# The Arduino API the library and sketches use, declared as the cores declare it.
ARDUINO_H = r"""
#ifndef STANDIN_ARDUINO_H_
#define STANDIN_ARDUINO_H_
#include <stddef.h>
#include <stdint.h>
#include <string.h>
class Print {
public:
    virtual ~Print() {}
    virtual size_t write(uint8_t c) = 0;
    virtual size_t write(const uint8_t* buffer, size_t size);
    size_t print(const char* s) { return write((const uint8_t*)s, strlen(s)); }
    size_t println(long n);
    virtual void flush() {}
};
class Stream : public Print {
public:
    virtual int available() = 0;
    virtual int read() = 0;
    virtual int peek() = 0;
};
class HardwareSerial : public Stream {
public:
    void begin(unsigned long baud);
    size_t write(uint8_t c);
    using Print::write;
    int available();
    int read();
    int peek();
    operator bool();
};
extern HardwareSerial Serial;
unsigned long millis(void);
unsigned long micros(void);
void delay(unsigned long ms);
#endif
"""

# The Zephyr API platform_zephyr.c and main.c use, with Zephyr's signatures.
ZEPHYR_H = {
    "zephyr/kernel.h": r"""
#ifndef STANDIN_ZEPHYR_KERNEL_H_
#define STANDIN_ZEPHYR_KERNEL_H_
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
typedef struct { int64_t ticks; } k_timeout_t;
#define K_FOREVER ((k_timeout_t){-1})
#define K_NO_WAIT ((k_timeout_t){0})
struct k_sem { unsigned int count; unsigned int limit; };
#define K_SEM_DEFINE(name, initial_count, count_limit) \
    struct k_sem name = {(initial_count), (count_limit)}
int k_sem_take(struct k_sem* sem, k_timeout_t timeout);
void k_sem_give(struct k_sem* sem);
int32_t k_sleep(k_timeout_t timeout);
void k_yield(void);
uint32_t k_cycle_get_32(void);
int sys_clock_hw_cycles_per_sec(void);
#endif
""",
    "zephyr/device.h": r"""
#ifndef STANDIN_ZEPHYR_DEVICE_H_
#define STANDIN_ZEPHYR_DEVICE_H_
#include <stdbool.h>
struct device { const char* name; const void* config; const void* api; void* data; };
bool device_is_ready(const struct device* dev);
extern const struct device standin_chosen_uart;
#define DEVICE_DT_GET(node_id) (&standin_chosen_uart)
#endif
""",
    "zephyr/devicetree.h": r"""
#ifndef STANDIN_ZEPHYR_DEVICETREE_H_
#define STANDIN_ZEPHYR_DEVICETREE_H_
#define DT_CHOSEN(prop) DT_N_CHOSEN_##prop
#ifndef STANDIN_HAS_MTVM_UART
#define STANDIN_HAS_MTVM_UART 0
#endif
#define DT_HAS_CHOSEN(prop) STANDIN_HAS_MTVM_UART
#endif
""",
    "zephyr/drivers/uart.h": r"""
#ifndef STANDIN_ZEPHYR_UART_H_
#define STANDIN_ZEPHYR_UART_H_
#include <stdint.h>
#include <zephyr/device.h>
typedef void (*uart_irq_callback_user_data_t)(const struct device* dev, void* user_data);
int uart_irq_callback_user_data_set(const struct device* dev,
                                    uart_irq_callback_user_data_t cb, void* user_data);
void uart_irq_rx_enable(const struct device* dev);
int uart_irq_update(const struct device* dev);
int uart_irq_rx_ready(const struct device* dev);
int uart_fifo_read(const struct device* dev, uint8_t* rx_data, const int size);
int uart_poll_in(const struct device* dev, unsigned char* p_char);
void uart_poll_out(const struct device* dev, unsigned char out_char);
#endif
""",
}

# Zephyr's CMake functions, stubbed: `cmake -P` runs the module's and the app's
# CMakeLists.txt and writes what they declare, one item a line.
ZEPHYR_CMAKE_STUBS = r"""
function(zephyr_library_named name)
  file(APPEND ${OUT} "library ${name}\n")
endfunction()
foreach(kind sources include_directories compile_definitions)
  foreach(prefix zephyr_library_ zephyr_)
    # (CMake has no closures: one stub per name through cmake_language(EVAL))
    cmake_language(EVAL CODE "
function(${prefix}${kind})
  foreach(x \${ARGN})
    file(APPEND \${OUT} \"${prefix}${kind} \${x}\\n\")
  endforeach()
endfunction()")
  endforeach()
endforeach()
function(find_package)
  file(APPEND ${OUT} "find_package ${ARGV}\n")
endfunction()
macro(project)
  file(APPEND ${OUT} "project ${ARGV}\n")
endmacro()
function(target_sources)
  foreach(x ${ARGN})
    file(APPEND ${OUT} "target_sources ${x}\n")
  endforeach()
endfunction()
file(WRITE ${OUT} "")
"""


def quiet(msg):
    pass


def model_path(name):
    return os.path.join(MODELS_DIR, name + ".onnx")


@pytest.fixture(scope="module")
def boards_path(tmp_path_factory):
    """A directory with the SAMD21 board file, on MTVM_BOARDS_PATH for this module."""
    d = tmp_path_factory.mktemp("boards")
    with open(d / "samd21-arduino.json", "w") as f:
        json.dump(SAMD21, f)
    mp = pytest.MonkeyPatch()
    mp.setenv("MTVM_BOARDS_PATH", str(d))
    yield str(d)
    mp.undo()


@pytest.fixture(scope="module")
def compiled(boards_path):
    """(model, board) -> the model compiled for the board's target (shared)."""
    cache = {}

    def get(name, board):
        if (name, board) not in cache:
            target = Target.from_board(mtvm.project.load_board(board))
            cache[name, board] = mtvm.compile(model_path(name), target=target)
        return cache[name, board]
    return get


def run_all(jobs):
    """Runs the (argv, cwd) compiler commands two at a time; fails with the first
    error's output."""
    def one(job):
        argv, cwd = job
        return argv, subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for argv, r in pool.map(one, jobs):
            assert r.returncode == 0, f"{' '.join(argv)}\n{r.stdout}{r.stderr}"


def cpu_flags(board):
    return list(mtvm.project.load_board(board)["cflags"])


# -- arduino ----------------------------------------------------------------------------------
def arduino_jobs(lib, board, objdir):
    """The compiler commands of an Arduino build of the library and its example:
    every .c of src/ with gcc, every .cpp with g++, the sketch as the .cpp the
    Arduino builder makes of it (Arduino.h first), all with -Isrc only."""
    stand = os.path.join(objdir, "core")
    os.makedirs(stand, exist_ok=True)
    with open(os.path.join(stand, "Arduino.h"), "w") as f:
        f.write(ARDUINO_H)
    flags = ARDUINO_COMMON + cpu_flags(board) + ARDUINO_DEFINES[board]
    inc = ["-I" + stand, "-I" + os.path.join(lib, "src")]
    jobs = []
    src = os.path.join(lib, "src")
    for n in sorted(os.listdir(src)):
        out = os.path.join(objdir, n + ".o")
        if n.endswith(".c"):
            jobs.append((["arm-none-eabi-gcc"] + flags + ARDUINO_C + inc
                         + [os.path.join(src, n), "-o", out], lib))
        elif n.endswith(".cpp"):
            jobs.append((["arm-none-eabi-g++"] + flags + ARDUINO_CXX + inc
                         + [os.path.join(src, n), "-o", out], lib))
    for d in sorted(os.listdir(os.path.join(lib, "examples"))):
        ino = os.path.join(lib, "examples", d, d + ".ino")
        cpp = os.path.join(objdir, d + ".ino.cpp")
        with open(ino) as f, open(cpp, "w") as g:
            g.write(f'#include <Arduino.h>\n#line 1 "{ino}"\n' + f.read())
        jobs.append((["arm-none-eabi-g++"] + flags + ARDUINO_CXX + inc
                     + [cpp, "-o", cpp + ".o"], lib))
    return jobs


@need_models
@need_arm_gcc
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("board", ["samd21-arduino", "nrf52840dk"])
def test_arduino_library_compiles(name, board, compiled, tmp_path):
    kind = "standalone" if board == "samd21-arduino" else "host-driven"
    sample = os.path.join(MODELS_DIR, name + ".npz") if kind == "standalone" else None
    p = mtvm.project.generate(compiled(name, board), board=board, out_dir=str(tmp_path / "lib"),
                              template="arduino", kind=kind, sample=sample, progress=quiet)
    lib = p.dir
    props = dict(ln.split("=", 1) for ln in open(p.path("library.properties")).read().splitlines())
    libname = "mtvm_" + name
    assert props["name"] == libname and props["includes"] == f"{libname}.h"
    assert props["architectures"] == "*"
    example = "mtvm_standalone" if kind == "standalone" else "mtvm_session"
    assert os.listdir(p.path("examples")) == [example]
    ino = open(p.path("examples", example, example + ".ino")).read()
    assert f"#include <{libname}.h>" in ino
    assert ("mtvm_standalone_run" if kind == "standalone" else "mtvm_server_feed") in ino
    # everything the Arduino build compiles is flat in src/ (the only include directory)
    src = set(os.listdir(p.path("src")))
    assert {"tvmgen_default.h", "tvmgen_default.c", "tvmgen_default_internal.h",
            "mtvm_server.c", "mtvm_server.h", "mtvm_model_desc.c",
            "mtvm_platform_arduino.cpp", f"{libname}.h", "mtvm_arduino_config.h"} <= src
    assert ("mtvm_sample.c" in src) == (kind == "standalone")
    assert not [n for n in src if os.path.isdir(p.path("src", n))]
    packet = mtvm.project.load_board(board)["max_packet_bytes"]
    assert f"#define MTVM_MAX_PACKET_BYTES {packet}" in open(
        p.path("src", "mtvm_arduino_config.h")).read()
    assert p.info["template"] == "arduino"
    run_all(arduino_jobs(lib, board, str(tmp_path / "obj")))
    with pytest.raises(MtvmError, match="arduino-cli compile --fqbn"):
        p.build(progress=quiet)


@need_arm_gcc
def test_arduino_library_refuses_a_core_without_the_models_fpu(tmp_path, boards_path):
    """The model compiled for the nRF52840's Cortex-M4F, built by a Cortex-M0+ core:
    the config header's #error, not a failure deep in a kernel."""
    ex = os.path.join(os.path.dirname(__file__), "..", "examples", "sensor_mlp.onnx")
    p = mtvm.project.generate(ex, board="nrf52840dk", out_dir=str(tmp_path / "lib"),
                              template="arduino", progress=quiet)
    r = subprocess.run(["arm-none-eabi-gcc"] + ARDUINO_COMMON + cpu_flags("samd21-arduino")
                       + ARDUINO_C + ["-I" + p.path("src"), p.path("src", "mtvm_server.c"),
                                      "-o", str(tmp_path / "x.o")],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "compiled by mtvm for cortex-m4, which has a hardware FPU" in r.stderr


# -- zephyr -----------------------------------------------------------------------------------
def zephyr_cmake(p, tmp_path) -> list[str]:
    """Runs the module's and the app's CMakeLists.txt under `cmake -P` with Zephyr's
    functions stubbed; returns what they declared."""
    out = str(tmp_path / "declared.txt")
    script = tmp_path / "check.cmake"
    script.write_text(ZEPHYR_CMAKE_STUBS + f"""
set(CONFIG_MTVM y)
set(CONFIG_MTVM_MAX_PACKET_BYTES 2048)
include({p.path("CMakeLists.txt")})
set(CMAKE_CURRENT_SOURCE_DIR {p.path("app")})
include({p.path("app", "CMakeLists.txt")})
file(APPEND ${{OUT}} "modules ${{ZEPHYR_EXTRA_MODULES}}\\n")
""")
    r = subprocess.run(["cmake", f"-DOUT={out}", "-P", str(script)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return open(out).read().splitlines()


def zephyr_jobs(p, board, objdir, declared):
    """arm-none-eabi-gcc -std=c99 -Wall -Wextra -Werror with the board's cpu flags for
    every C file the module and the app declare, against the stand-in headers."""
    stand = os.path.join(objdir, "zephyr_standin")
    for rel, text in ZEPHYR_H.items():
        os.makedirs(os.path.dirname(os.path.join(stand, rel)), exist_ok=True)
        with open(os.path.join(stand, rel), "w") as f:
            f.write(text)
    defs = [ln.split(" ", 1)[1] for ln in declared if ln.startswith("zephyr_compile_definitions")]
    incs = [ln.split(" ", 1)[1] for ln in declared if "include_directories" in ln]
    srcs = [ln.split(" ", 1)[1] for ln in declared if ln.startswith("zephyr_library_sources")]
    srcs += [os.path.join(p.dir, "app", ln.split(" ", 1)[1]) if not
             os.path.isabs(ln.split(" ", 1)[1]) else ln.split(" ", 1)[1]
             for ln in declared if ln.startswith("target_sources ")
             and ln.split(" ", 1)[1].endswith(".c")]
    flags = (["-c", "-std=c99", "-Os", "-Wall", "-Wextra", "-Werror",
              "-ffunction-sections", "-fdata-sections"]
             + ["-D" + d for d in defs] + ["-I" + stand] + ["-I" + i for i in incs]
             + ["-I" + p.path("app", "src")])
    cc = ["arm-none-eabi-gcc"] + cpu_flags(board) if board else ["cc"]
    return [(cc + flags + [s, "-o", os.path.join(objdir, f"{i}.o")], p.dir)
            for i, s in enumerate(srcs)], srcs


@need_models
@need_arm_gcc
@need_cmake
@pytest.mark.parametrize("name,board,kind", [
    ("kws_dscnn", "nrf52840dk", "host-driven"),
    ("vww_mobilenetv1_int8", "nrf52840dk", "standalone"),
    ("vww_mobilenetv1_int8", "samd21-arduino", "host-driven")])
def test_zephyr_project_files_and_c(name, board, kind, compiled, tmp_path):
    import yaml
    sample = os.path.join(MODELS_DIR, name + ".npz") if kind == "standalone" else None
    p = mtvm.project.generate(compiled(name, board), board=board, out_dir=str(tmp_path / "z"),
                              template="zephyr", kind=kind, sample=sample, progress=quiet)
    mod = yaml.safe_load(open(p.path("zephyr", "module.yml")))
    assert mod == {"name": "mtvm_" + name, "build": {"cmake": ".", "kconfig": "Kconfig"}}
    kconfig = open(p.path("Kconfig")).read()
    assert re.search(r"^menuconfig MTVM\n\tbool ", kconfig, re.M)
    assert re.search(r"^config MTVM_MAX_PACKET_BYTES\n\tint ", kconfig, re.M)
    conf = dict(ln.split("=", 1) for ln in open(p.path("app", "prj.conf")).read().splitlines()
                if ln and not ln.startswith("#"))
    assert conf["CONFIG_MTVM"] == "y" and conf["CONFIG_UART_INTERRUPT_DRIVEN"] == "y"
    assert conf["CONFIG_MTVM_MAX_PACKET_BYTES"] == str(
        mtvm.project.load_board(board)["max_packet_bytes"])
    assert ("CONFIG_FPU" in conf) == (board == "nrf52840dk")
    # every Kconfig symbol prj.conf sets for the module is defined by the module
    assert {k for k in conf if k.startswith("CONFIG_MTVM")} == {
        "CONFIG_" + s for s in re.findall(r"^(?:menu)?config (\w+)", kconfig, re.M)}
    declared = zephyr_cmake(p, tmp_path)
    assert "library mtvm" in declared
    assert f"modules {p.dir}" in declared
    assert any(ln.startswith("find_package Zephyr;REQUIRED") for ln in declared)
    jobs, srcs = zephyr_jobs(p, board, str(tmp_path), declared)
    names = {os.path.basename(s) for s in srcs}
    assert {"main.c", "platform_zephyr.c", "mtvm_server.c", "mtvm_model_desc.c",
            "tvmgen_default.c"} <= names
    assert ("mtvm_sample.c" in names) == (kind == "standalone")
    assert all(os.path.isfile(s) for s in srcs)
    run_all(jobs)
    zb = "nrf52840dk/nrf52840" if board == "nrf52840dk" else "<zephyr board>"
    with pytest.raises(MtvmError, match=f"west build -b {re.escape(zb)} "):
        p.build(progress=quiet)


@need_arm_gcc
def test_zephyr_platform_with_a_chosen_mtvm_uart(tmp_path):
    """The devicetree's mtvm,uart branch compiles too."""
    ex = os.path.join(os.path.dirname(__file__), "..", "examples", "sensor_mlp.onnx")
    p = mtvm.project.generate(ex, board="nrf52840dk", out_dir=str(tmp_path / "z"),
                              template="zephyr", progress=quiet)
    stand = tmp_path / "standin"
    for rel, text in ZEPHYR_H.items():
        (stand / rel).parent.mkdir(parents=True, exist_ok=True)
        (stand / rel).write_text(text)
    r = subprocess.run(["arm-none-eabi-gcc", "-c", "-std=c99", "-Wall", "-Wextra", "-Werror",
                        "-DSTANDIN_HAS_MTVM_UART=1", "-I" + str(stand),
                        "-I" + p.path("c_runtime", "include"), "-I" + p.path("app", "src"),
                        p.path("app", "src", "platform_zephyr.c"), "-o", str(tmp_path / "p.o")]
                       + cpu_flags("nrf52840dk"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# -- templates, CLI, names ----------------------------------------------------------------------
def test_cli_and_template_choice(tmp_path, boards_path, capsys):
    ex = os.path.join(os.path.dirname(__file__), "..", "examples", "sensor_mlp.onnx")
    assert cli(["project", "generate", ex, "--board", "samd21-arduino", "--template", "arduino",
                "-o", str(tmp_path / "a")]) == 0
    assert os.path.isfile(tmp_path / "a" / "library.properties")
    assert cli(["project", "generate", ex, "--board", "nrf52840dk", "--template", "zephyr",
                "-o", str(tmp_path / "z"), "--kind", "standalone"]) == 0
    assert os.path.isfile(tmp_path / "z" / "app" / "prj.conf")
    for t in ("arduino", "zephyr"):
        with pytest.raises(MtvmError, match=f"template '{t}' does not build for board host "
                                            r"\(a host board\)"):
            mtvm.project.generate(ex, board="host", out_dir=str(tmp_path / f"h{t}"),
                                  template=t, progress=quiet)
    # a cortex_m board lists them among its templates
    with pytest.raises(MtvmError, match=r"templates for it: cortex_m, .*arduino.*zephyr"):
        mtvm.project.generate(ex, board="nrf52840dk", out_dir=str(tmp_path / "x"),
                              template="host", progress=quiet)
    # regenerating keeps the template
    p = mtvm.project.generate(ex, board="nrf52840dk", out_dir=str(tmp_path / "z"), force=True,
                              kind="standalone", progress=quiet)
    assert p.info["template"] == "zephyr"
    with pytest.raises(MtvmError, match="--port"):
        mtvm.project.load(str(tmp_path / "a")).open_transport()


@need_arm_gcc
@need_cmake
def test_hostile_names_stay_out_of_the_files(tmp_path):
    """A graph name and a module name made to break out of every file kind the two
    templates write (C comments and strings, library.properties lines, YAML, CMake,
    Kconfig, prj.conf): they become words, and the C still compiles."""
    import yaml
    from onnx import TensorProto, helper
    marker = str(tmp_path / "INJECTED")
    evil = (f'x */ "\n#error evil\nname=pwn\n$(touch {marker})\nexecute_process(COMMAND '
            f'touch {marker})\nconfig EVIL\n  bool "y"\nCONFIG_EVIL=y\n: {{a: b}} #é')
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name=evil)], evil,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    target = Target.from_board(mtvm.project.load_board("nrf52840dk"))
    cm = mtvm.compile(m, module_name=evil, target=target)
    a = mtvm.project.generate(cm, board="nrf52840dk", out_dir=str(tmp_path / "a"),
                              template="arduino", progress=quiet)
    z = mtvm.project.generate(cm, board="nrf52840dk", out_dir=str(tmp_path / "z"),
                              template="zephyr", kind="standalone", progress=quiet)
    texts = {}
    for proj in (a, z):
        for d, _, files in os.walk(proj.dir):
            if "model" in os.path.relpath(d, proj.dir).split(os.sep)[:1]:
                continue
            for f in files:
                if f.endswith((".h", ".c", ".cpp", ".ino", ".properties", ".yml", ".txt",
                               ".conf")) or f == "Kconfig":
                    texts[os.path.join(d, f)] = open(os.path.join(d, f)).read()
    # no line of any file starts what the name held (in C comments and strings the
    # codegen escapes it: \x0a)
    for path, text in texts.items():
        assert text.isascii(), path
        assert not re.search(r"^\s*(#error evil|execute_process|config EVIL|CONFIG_EVIL|"
                             r"name=pwn|\$\(touch|: \{a)", text, re.M), path
    props = open(a.path("library.properties")).read().splitlines()
    assert len(props) == 9 and all(re.fullmatch(r"[a-z]+=[^\n]*", ln) for ln in props)
    lib = dict(ln.split("=", 1) for ln in props)["name"]
    assert re.fullmatch(r"mtvm_[A-Za-z0-9_]+", lib)
    assert re.fullmatch(r"mtvm_[A-Za-z0-9_]+", yaml.safe_load(
        open(z.path("zephyr", "module.yml")))["name"])
    declared = zephyr_cmake(z, tmp_path)
    run_all(arduino_jobs(a.dir, "nrf52840dk", str(tmp_path / "ao"))
            + zephyr_jobs(z, "nrf52840dk", str(tmp_path), declared)[0])
    assert not os.path.exists(marker)


# -- the same C run on the host: stand-in implementations, a real session ---------------------
# The Arduino API on POSIX: Serial is stdin/stdout, micros() the monotonic clock, and
# main() calls setup() then loop() forever (as the cores' main.cpp does).
ARDUINO_HOST_CORE = r"""
#include <Arduino.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
HardwareSerial Serial;
static uint8_t rx[4096];
static size_t rx_len, rx_pos;
size_t Print::write(const uint8_t* buffer, size_t size) {
    size_t i = 0;
    while (i < size && write(buffer[i])) i++;
    return i;
}
size_t Print::println(long n) {
    char t[32];
    int k = snprintf(t, sizeof t, "%ld\r\n", n);
    return write((const uint8_t*)t, (size_t)k);
}
void HardwareSerial::begin(unsigned long) {}
size_t HardwareSerial::write(uint8_t c) { return ::write(1, &c, 1) == 1 ? 1 : 0; }
int HardwareSerial::available() {
    if (rx_pos < rx_len) return (int)(rx_len - rx_pos);
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, 1) <= 0) return 0;
    ssize_t n = ::read(0, rx, sizeof rx);
    if (n <= 0) exit(0);
    rx_len = (size_t)n;
    rx_pos = 0;
    return (int)n;
}
int HardwareSerial::read() { return available() > 0 ? rx[rx_pos++] : -1; }
int HardwareSerial::peek() { return available() > 0 ? rx[rx_pos] : -1; }
HardwareSerial::operator bool() { return true; }
static unsigned long long now_us() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000ull + (unsigned long long)t.tv_nsec / 1000u;
}
unsigned long micros(void) { return (unsigned long)now_us(); }
unsigned long millis(void) { return (unsigned long)(now_us() / 1000u); }
void delay(unsigned long ms) { usleep((useconds_t)(ms * 1000u)); }
void setup();
void loop();
int main() {
    setup();
    for (;;) loop();
}
"""

# Zephyr's UART and kernel on POSIX: the UART is stdin/stdout; its "interrupt" runs
# when k_sem_take would sleep and stdin has bytes (STANDIN_NO_IRQ=1: a driver without
# interrupts, polled); cycles are nanoseconds.
ZEPHYR_HOST_KERNEL = r"""
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
const struct device standin_chosen_uart = {"uart0", 0, 0, 0};
static uart_irq_callback_user_data_t isr;
static void* isr_data;
static uint8_t pending[4096];
static int n_pending, p_pending;
static int fill(int timeout_ms) {
    struct pollfd p = {0, POLLIN, 0};
    ssize_t n;
    if (poll(&p, 1, timeout_ms) <= 0) return 0;
    n = read(0, pending, sizeof pending);
    if (n <= 0) exit(0);
    n_pending = (int)n;
    p_pending = 0;
    return 1;
}
bool device_is_ready(const struct device* dev) { return dev == &standin_chosen_uart; }
int uart_irq_callback_user_data_set(const struct device* dev,
                                    uart_irq_callback_user_data_t cb, void* user_data) {
    (void)dev;
    if (getenv("STANDIN_NO_IRQ")) return -88;
    isr = cb;
    isr_data = user_data;
    return 0;
}
void uart_irq_rx_enable(const struct device* dev) { (void)dev; }
int uart_irq_update(const struct device* dev) { (void)dev; return 1; }
int uart_irq_rx_ready(const struct device* dev) { (void)dev; return p_pending < n_pending; }
int uart_fifo_read(const struct device* dev, uint8_t* rx_data, const int size) {
    int n = 0;
    (void)dev;
    while (n < size && p_pending < n_pending) rx_data[n++] = pending[p_pending++];
    return n;
}
int uart_poll_in(const struct device* dev, unsigned char* p_char) {
    (void)dev;
    if (p_pending >= n_pending && !fill(1)) return -1;
    *p_char = pending[p_pending++];
    return 0;
}
void uart_poll_out(const struct device* dev, unsigned char out_char) {
    (void)dev;
    if (write(1, &out_char, 1) != 1) exit(1);
}
int k_sem_take(struct k_sem* sem, k_timeout_t timeout) {
    (void)timeout;
    while (sem->count == 0) {
        if (fill(-1)) isr(&standin_chosen_uart, isr_data);
    }
    sem->count--;
    return 0;
}
void k_sem_give(struct k_sem* sem) { if (sem->count < sem->limit) sem->count++; }
int32_t k_sleep(k_timeout_t timeout) { (void)timeout; pause(); return 0; }
void k_yield(void) {}
uint32_t k_cycle_get_32(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint32_t)((uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec);
}
int sys_clock_hw_cycles_per_sec(void) { return 1000000000; }
"""


def host_session_matches_reference(exe, name, env=None):
    import numpy as np
    from mtvm.session import Session
    from mtvm.session import transport as tr
    with np.load(os.path.join(MODELS_DIR, name + ".npz")) as z:
        x, ref = z["in_0"], z["out_0"]
    t = tr.subprocess([exe], env=env)
    md = json.load(open(os.path.join(os.path.dirname(os.path.dirname(exe)), "model",
                                     "metadata.json")))
    with Session(t, metadata=md, timeout=10) as s:
        y = list(s.executor.run([x]).values())[0]
    err = float(np.abs(y.astype(np.float64) - ref).max())
    assert err <= 1e-4 * max(float(np.abs(ref).max()), 1.0), f"{name}: max abs error {err}"


@need_models
@pytest.mark.skipif(not (have("cc") and have("c++")), reason="no host C/C++ compiler")
def test_arduino_sketch_runs_a_session_on_the_host(tmp_path, boards_path):
    """The library and the mtvm_session sketch built for the host against a POSIX
    Arduino core (the model compiled for target c), driven by a real session."""
    name = "kws_dscnn"
    cm = mtvm.compile(model_path(name), target="c")
    p = mtvm.project.generate(cm, board="nrf52840dk", out_dir=str(tmp_path / "lib"),
                              template="arduino", progress=quiet)
    core = tmp_path / "core"
    core.mkdir()
    (core / "Arduino.h").write_text(ARDUINO_H)
    (core / "core.cpp").write_text(ARDUINO_HOST_CORE)
    src = p.path("src")
    sketch = tmp_path / "sketch.ino.cpp"
    sketch.write_text("#include <Arduino.h>\n" + open(
        p.path("examples", "mtvm_session", "mtvm_session.ino")).read())
    inc = ["-I" + str(core), "-I" + src]
    objs, jobs = [], []
    for f in sorted(os.listdir(src)) + [str(core / "core.cpp"), str(sketch)]:
        full = f if os.path.isabs(f) else os.path.join(src, f)
        if not full.endswith((".c", ".cpp")):
            continue
        obj = str(tmp_path / (os.path.basename(full) + ".o"))
        cc = ["cc", "-std=gnu11"] if full.endswith(".c") else ["c++", "-std=gnu++11"]
        jobs.append((cc + ["-c", "-O1", "-Wall", "-Wextra", "-Werror"] + inc + [full, "-o", obj],
                     str(tmp_path)))
        objs.append(obj)
    run_all(jobs)
    exe = p.path("build", "sketch")
    os.makedirs(p.path("build"), exist_ok=True)
    run_all([(["c++"] + objs + ["-o", exe, "-lm"], str(tmp_path))])
    host_session_matches_reference(exe, name)


@need_models
@pytest.mark.skipif(not have("cc"), reason="no host C compiler")
@pytest.mark.parametrize("irq", [True, False], ids=["interrupt-ring", "polled"])
def test_zephyr_app_runs_a_session_on_the_host(irq, tmp_path):
    """The module's sources and the app's main.c/platform_zephyr.c built for the host
    against a POSIX Zephyr stand-in (the model compiled for target c), driven by a
    real session: through the interrupt-fed ring, and polled."""
    name = "kws_dscnn"
    cm = mtvm.compile(model_path(name), target="c")
    p = mtvm.project.generate(cm, board="nrf52840dk", out_dir=str(tmp_path / "z"),
                              template="zephyr", progress=quiet)
    declared = zephyr_cmake(p, tmp_path)
    kernel = tmp_path / "kernel_standin.c"
    kernel.write_text(ZEPHYR_HOST_KERNEL)
    declared.append(f"zephyr_library_sources {kernel}")
    host_jobs, _ = zephyr_jobs(p, None, str(tmp_path), declared)
    objs = [argv[-1] for argv, _ in host_jobs]
    run_all(host_jobs)
    exe = p.path("build", "app")
    os.makedirs(p.path("build"), exist_ok=True)
    run_all([(["cc"] + objs + ["-o", exe, "-lm"], str(tmp_path))])
    env = dict(os.environ)
    if not irq:
        env["STANDIN_NO_IRQ"] = "1"
    host_session_matches_reference(exe, name, env=env)


def test_arduino_library_header_never_replaces_a_runtime_header(tmp_path):
    """A model named `model` or `server` would make the library's header
    mtvm_model.h / mtvm_server.h: it gets another name."""
    from onnx import TensorProto, helper
    for gname in ("model", "server"):
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], gname,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        p = mtvm.project.generate(mtvm.compile(m, target="c"), board="nrf52840dk",
                                  out_dir=str(tmp_path / gname), template="arduino",
                                  progress=quiet)
        props = dict(ln.split("=", 1) for ln in
                     open(p.path("library.properties")).read().splitlines())
        assert props["name"] == f"mtvm_{gname}_lib"
        assert "typedef struct mtvm_server" in open(p.path("src", "mtvm_server.h")).read() \
            or gname != "server"
        assert "mtvm_model_t" in open(p.path("src", "mtvm_model.h")).read()
        assert os.path.isfile(p.path("src", f"mtvm_{gname}_lib.h"))
