//! One thread keeps `REQUESTS` inferences of a model in flight through
//! OpenVINO's C API, restarting each as it completes, and reads the first
//! output value of each (as an f32: the model's first output holds at least
//! 4 bytes, or the run stops with that said): what the request path costs the thread that drives
//! it, with no Python on the way.
//!
//!     request_path MODEL.xml REQUESTS COUNT wait|callback
//!
//! `wait`: waits on the oldest request (`ov_infer_request_wait`), as
//! npu_zc's queue does; `callback`: each request's completion callback
//! queues its index and the thread takes every queued one at a time.
//! Prints one JSON line: requests a second, and the driving thread's CPU,
//! the wall time and the process's CPU per request.
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use rustix::time::{clock_gettime, ClockId};

type Status = i32; // ov_status_e: 0 is OK

#[repr(C)]
struct Callback {
    function: extern "C" fn(args: *mut c_void),
    args: *mut c_void,
}

// As declared in OpenVINO's src/bindings/c/include/openvino/c/ov_*.h.
extern "C" {
    fn ov_core_create(core: *mut *mut c_void) -> Status;
    fn ov_core_free(core: *mut c_void);
    fn ov_core_read_model(
        core: *const c_void,
        xml: *const c_char,
        bin: *const c_char,
        model: *mut *mut c_void,
    ) -> Status;
    fn ov_core_compile_model(
        core: *const c_void,
        model: *const c_void,
        device: *const c_char,
        property_args_size: usize,
        compiled: *mut *mut c_void,
        ...
    ) -> Status;
    fn ov_model_free(model: *mut c_void);
    fn ov_compiled_model_create_infer_request(compiled: *const c_void, request: *mut *mut c_void) -> Status;
    fn ov_compiled_model_free(compiled: *mut c_void);
    fn ov_infer_request_start_async(request: *mut c_void) -> Status;
    fn ov_infer_request_wait(request: *mut c_void) -> Status;
    fn ov_infer_request_wait_for(request: *mut c_void, timeout_ms: i64) -> Status;
    fn ov_infer_request_set_callback(request: *mut c_void, callback: *const Callback) -> Status;
    fn ov_infer_request_get_input_tensor_by_index(
        request: *const c_void,
        index: usize,
        tensor: *mut *mut c_void,
    ) -> Status;
    fn ov_infer_request_get_output_tensor_by_index(
        request: *const c_void,
        index: usize,
        tensor: *mut *mut c_void,
    ) -> Status;
    fn ov_infer_request_free(request: *mut c_void);
    fn ov_tensor_data(tensor: *const c_void, data: *mut *mut c_void) -> Status;
    fn ov_tensor_get_byte_size(tensor: *const c_void, size: *mut usize) -> Status;
    fn ov_tensor_free(tensor: *mut c_void);
    fn ov_get_last_err_msg() -> *mut c_char;
    fn ov_free(content: *const c_char);
}

fn check(status: Status, what: &str) -> Result<(), String> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: the message is a heap string of OpenVINO's (or null), released with ov_free.
    let message = unsafe {
        let text = ov_get_last_err_msg();
        if text.is_null() {
            String::new()
        } else {
            let owned = CStr::from_ptr(text).to_string_lossy().into_owned();
            ov_free(text);
            owned
        }
    };
    Err(format!("{what} failed (status {status}): {message}"))
}

/// The completed requests' indices, queued by their callbacks (on OpenVINO's threads).
struct Completions {
    done: Mutex<Vec<usize>>,
    ready: Condvar,
}

struct Slot {
    completions: *const Completions,
    index: usize,
}

extern "C" fn completed(args: *mut c_void) {
    // SAFETY: `args` is a `Slot` that outlives its request (main frees the requests first).
    let slot = unsafe { &*(args as *const Slot) };
    let completions = unsafe { &*slot.completions };
    completions.done.lock().unwrap_or_else(|e| e.into_inner()).push(slot.index);
    completions.ready.notify_one();
}

/// A request with its first output's data, read after each completion.
struct Request {
    handle: *mut c_void,
    output: *mut c_void,
    first: *const f32,
}

impl Request {
    fn new(compiled: *const c_void) -> Result<Self, String> {
        let mut handle = ptr::null_mut();
        // SAFETY: `compiled` is a live compiled model; each out-pointer is written on success.
        unsafe {
            check(ov_compiled_model_create_infer_request(compiled, &mut handle), "create_infer_request")?;
            let mut request = Request { handle, output: ptr::null_mut(), first: ptr::null() };
            let mut input = ptr::null_mut();
            check(ov_infer_request_get_input_tensor_by_index(handle, 0, &mut input), "get_input_tensor")?;
            let (mut data, mut bytes) = (ptr::null_mut(), 0usize);
            let filled = check(ov_tensor_data(input, &mut data), "tensor_data")
                .and_then(|()| check(ov_tensor_get_byte_size(input, &mut bytes), "tensor_get_byte_size"));
            if filled.is_ok() {
                ptr::write_bytes(data.cast::<u8>(), 0, bytes);
            }
            ov_tensor_free(input);
            filled?;
            check(ov_infer_request_get_output_tensor_by_index(handle, 0, &mut request.output), "get_output_tensor")?;
            let (mut out, mut bytes) = (ptr::null_mut(), 0usize);
            check(ov_tensor_data(request.output, &mut out), "tensor_data")?;
            check(ov_tensor_get_byte_size(request.output, &mut bytes), "tensor_get_byte_size")?;
            if bytes < size_of::<f32>() || out.is_null() {
                return Err(format!("the model's first output holds {bytes} bytes: at least 4 are read (an f32)"));
            }
            request.first = out.cast();
            Ok(request)
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        // SAFETY: the handles are this request's own; an inference still running is waited for first.
        unsafe {
            ov_infer_request_wait_for(self.handle, 10_000);
            if !self.output.is_null() {
                ov_tensor_free(self.output);
            }
            ov_infer_request_free(self.handle);
        }
    }
}

fn seconds(clock: ClockId) -> f64 {
    let t = clock_gettime(clock);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn run(model: &str, requests: usize, count: usize, callback: bool) -> Result<String, String> {
    let xml = CString::new(model).map_err(|e| e.to_string())?;
    let (device, hint, throughput) = (c"CPU", c"PERFORMANCE_HINT", c"THROUGHPUT");
    let (mut core, mut ir, mut compiled) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: each handle is created before use and freed once, after every request made from it.
    unsafe {
        check(ov_core_create(&mut core), "core_create")?;
        let compiledness =
            check(ov_core_read_model(core, xml.as_ptr(), ptr::null(), &mut ir), "read_model").and_then(|()| {
                check(
                    ov_core_compile_model(
                        core,
                        ir,
                        device.as_ptr(),
                        2,
                        &mut compiled,
                        hint.as_ptr(),
                        throughput.as_ptr(),
                    ),
                    "compile_model",
                )
            });
        let figures = compiledness.and_then(|()| drive(compiled, requests, count, callback));
        if !compiled.is_null() {
            ov_compiled_model_free(compiled);
        }
        if !ir.is_null() {
            ov_model_free(ir);
        }
        ov_core_free(core);
        figures
    }
}

fn drive(compiled: *const c_void, requests: usize, count: usize, callback: bool) -> Result<String, String> {
    let completions = Completions { done: Mutex::new(Vec::with_capacity(requests)), ready: Condvar::new() };
    let slots: Vec<Slot> = (0..requests).map(|index| Slot { completions: &completions, index }).collect();
    let callbacks: Vec<Callback> =
        slots.iter().map(|slot| Callback { function: completed, args: slot as *const Slot as *mut c_void }).collect();
    // Declared after the slots and callbacks: dropped (waited for and freed) before them.
    let pool = (0..requests).map(|_| Request::new(compiled)).collect::<Result<Vec<_>, _>>()?;
    let start = |r: &Request| check(unsafe { ov_infer_request_start_async(r.handle) }, "start_async");
    for _ in 0..3 {
        // warm-up: the first inferences of each request
        pool.iter().try_for_each(start)?;
        for r in &pool {
            check(unsafe { ov_infer_request_wait(r.handle) }, "wait")?;
        }
    }
    if callback {
        for (r, c) in pool.iter().zip(&callbacks) {
            check(unsafe { ov_infer_request_set_callback(r.handle, c) }, "set_callback")?;
        }
    }
    let (wall, thread, process) = (Instant::now(), seconds(ClockId::ThreadCPUTime), seconds(ClockId::ProcessCPUTime));
    pool.iter().try_for_each(start)?;
    let (mut finished, mut sum) = (0usize, 0.0f64);
    let mut taken = Vec::with_capacity(requests);
    let mut oldest = 0;
    while finished < count {
        if callback {
            let mut done = completions.done.lock().unwrap_or_else(|e| e.into_inner());
            while done.is_empty() {
                done = completions.ready.wait(done).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::swap(&mut *done, &mut taken);
        } else {
            check(unsafe { ov_infer_request_wait(pool[oldest].handle) }, "wait")?;
            taken.push(oldest);
            oldest = (oldest + 1) % requests;
        }
        for index in taken.drain(..) {
            finished += 1;
            // SAFETY: the request has completed: nothing writes its output now.
            sum += f64::from(unsafe { *pool[index].first });
            if finished + requests <= count {
                start(&pool[index])?;
            }
        }
    }
    let seconds_taken = wall.elapsed().as_secs_f64();
    let per = |s: f64| s / count as f64 * 1e6;
    Ok(format!(
        "{{\"path\": \"C API, {}\", \"requests\": {requests}, \"count\": {count}, \"per_second\": {:.1}, \
         \"thread_cpu_us\": {:.2}, \"wall_us\": {:.2}, \"process_cpu_us\": {:.2}, \"checksum\": {sum}}}",
        if callback { "callback" } else { "wait" },
        count as f64 / seconds_taken,
        per(seconds(ClockId::ThreadCPUTime) - thread),
        per(seconds_taken),
        per(seconds(ClockId::ProcessCPUTime) - process),
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: request_path MODEL.xml REQUESTS COUNT wait|callback";
    let [model, requests, count, mode] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (Ok(requests @ 1..), Ok(count), true) =
        (requests.parse::<usize>(), count.parse::<usize>(), mode == "wait" || mode == "callback")
    else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    match run(model, requests, count.max(requests), mode == "callback") {
        Ok(line) => println!("{line}"),
        Err(message) => {
            eprintln!("request_path: {message}");
            std::process::exit(1);
        }
    }
}
