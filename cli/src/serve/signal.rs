//! TERM and INT to serve, turned into an input of its loop: the handler only writes the
//! signal's number to a pipe (async-signal-safe); a thread reads it and tells the loop, which
//! stops the harness's whole group and its leftovers, then ends by the same signal.

use std::sync::atomic::{AtomicI32, Ordering};

/// The pipe's write end, for the handler.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// The signals serve stops on.
pub const STOPPING: [i32; 2] = [libc::SIGTERM, libc::SIGINT];

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a local.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// From now on, TERM and INT call `told` (on a thread of their own) instead of ending serve.
pub fn forward(told: impl Fn(i32) + Send + 'static) -> std::io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills the two descriptors it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (read, write) = (fds[0], fds[1]);
    PIPE_WRITE.store(write, Ordering::Relaxed);
    for signal in STOPPING {
        // SAFETY: the handler only does async-signal-safe work.
        unsafe { libc::signal(signal, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
    std::thread::spawn(move || loop {
        let mut byte = 0u8;
        // SAFETY: a one-byte read into a local from the pipe this function made.
        let n = unsafe { libc::read(read, (&mut byte as *mut u8).cast(), 1) };
        match n {
            1 => told(i32::from(byte)),
            -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    });
    Ok(())
}

/// Ends this process by `signal`, its default action restored, as it would have ended
/// without the handler (a service manager reads the same).
pub fn end_by(signal: i32) -> ! {
    // SAFETY: restoring the default disposition and raising the signal on this process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}
