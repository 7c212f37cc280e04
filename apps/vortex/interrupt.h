// Interrupts of the writing commands (generate, decode, synth, quantize): SIGINT, SIGTERM and SIGPIPE remove this
// process's own staging (io/staging.h), print "vortex <cmd>: interrupted (SIG...)" and exit 130 (SIGINT),
// 143 (SIGTERM) or 141 (SIGPIPE), the shell's 128 + signal. The handler only writes the signal to a pipe; a
// watcher thread does the cleanup, so a signal may arrive on any thread. Tested in tests/cli/cli_interrupt_test.cpp.
#pragma once

namespace vortex::cli {

// Installs the handlers and starts the watcher thread (once per process); `command` names it in the message.
void install_interrupt_cleanup(const char* command);

// True once one of the signals arrived; the watcher is then removing the staging and about to exit.
bool interrupted();

// Called by a command that fails or returns after an interrupt: waits for the watcher's exit instead of
// reporting an error the interrupt caused.
[[noreturn]] void await_interrupt_exit();

}  // namespace vortex::cli
