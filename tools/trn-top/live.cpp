#include "trn-top/live.hpp"

#include <curses.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "tool_common/clock.hpp"

namespace trn::tools {

namespace {

// ncurses set up for the screen's lifetime.
class Screen {
 public:
  Screen() {
    initscr();
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);  // keys are waited for with poll(), below
    curs_set(0);
  }
  ~Screen() { endwin(); }
  Screen(const Screen &) = delete;
  Screen &operator=(const Screen &) = delete;

  void draw(const Frame &frame, const View &view) {
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    View fitted = view;
    fitted.width = static_cast<size_t>(std::max(cols, 1));
    erase();
    const auto lines = render_top(frame, fitted);
    for (int row = 0; row < rows - 1 && row < static_cast<int>(lines.size()); ++row) {
      if (row == 0) attron(A_REVERSE);
      mvaddnstr(row, 0, lines[static_cast<size_t>(row)].c_str(), cols);
      if (row == 0) attroff(A_REVERSE);
    }
    const std::string keys = std::string("q quit  d/<-/-> device  p process  e ") +
                             (view.engines ? "core table" : "engine table") + "  ^L repaint";
    mvaddnstr(rows - 1, 0, keys.c_str(), cols);
    refresh();
  }

  // The next draw repaints the whole terminal, not only what changed (Ctrl-L).
  void repaint() { clearok(curscr, TRUE); }
};

// The next key before `deadline_ns`, or ERR when none came. Standard input that is readable but
// yields no key (at end of file, or hung up) is not waited on again before the deadline, so a
// closed input never makes the loop spin.
int wait_for_key(uint64_t deadline_ns, const std::atomic<bool> &stop) {
  const uint64_t now = monotonic_ns();
  if (now >= deadline_ns) return ERR;
  const int timeout_ms = static_cast<int>((deadline_ns - now + 999999) / 1000000);
  pollfd input{STDIN_FILENO, POLLIN, 0};
  const int ready = poll(&input, 1, timeout_ms);
  if (ready < 0) return getch();  // a signal: KEY_RESIZE after SIGWINCH, else ERR
  if (ready == 0) return ERR;
  const int key = getch();
  if (key == ERR) sleep_until(deadline_ns, stop);
  return key;
}

// The next process pid after `current` on the device (0 = all), wrapping.
int32_t next_process(const Frame &frame, size_t device, int32_t current) {
  if (device >= frame.devices.size()) return 0;
  const auto &processes = frame.devices[device].snapshot.processes;
  if (processes.empty()) return 0;
  if (current == 0) return processes.front().pid;
  for (size_t i = 0; i + 1 < processes.size(); ++i)
    if (processes[i].pid == current) return processes[i + 1].pid;
  return 0;
}

}  // namespace

int run_live(Sampler &sampler, Frame baseline, View view, uint32_t delay_ms,
             const std::atomic<bool> &stop) {
  Screen screen;
  const uint64_t period_ns = static_cast<uint64_t>(delay_ms) * 1000000u;
  Frame frame = std::move(baseline);
  uint64_t next_sample = monotonic_ns() + period_ns;
  bool redraw = true;
  while (!stop.load()) {
    if (monotonic_ns() >= next_sample) {
      frame = sampler.sample();
      next_sample = monotonic_ns() + period_ns;
      redraw = true;
    }
    if (redraw) screen.draw(frame, view);
    redraw = false;
    const int key = wait_for_key(next_sample, stop);
    if (key == ERR) continue;
    redraw = true;
    const size_t devices = std::max<size_t>(1, frame.devices.size());
    view.device = std::min(view.device, devices - 1);
    if (key == 'q' || key == 'Q') break;
    const size_t shown = view.device;
    if (key == 'd' || key == KEY_RIGHT) view.device = (view.device + 1) % devices;
    if (key == KEY_LEFT) view.device = (view.device + devices - 1) % devices;
    if (view.device != shown) view.process = 0;  // a process focus belongs to its device
    if (key == 'p') view.process = next_process(frame, view.device, view.process);
    if (key == 'e') view.engines = !view.engines;
    if (key == '\f') screen.repaint();  // Ctrl-L
  }
  return 0;
}

}  // namespace trn::tools
