// trn-top: live view of NeuronCore utilisation, memory and processes. Keys: q quits, d (or
// right/left) picks the device, p picks a process (or all). -b prints plain snapshots instead.
#include <curses.h>
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>

#include "trn-top/screen.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

void sleep_ms(uint32_t ms) {
  for (uint32_t slept = 0; slept < ms && !g_stop.load(); slept += 50) {
    struct timespec pause {
      0, static_cast<long>(std::min<uint32_t>(50, ms - slept)) * 1000000
    };
    nanosleep(&pause, nullptr);
  }
}

int run_batch(uint32_t delay_ms, uint32_t count, size_t width) {
  trn::tools::Sampler sampler;
  sampler.sample();
  for (uint32_t i = 0; (count == 0 || i < count) && !g_stop.load(); ++i) {
    sleep_ms(delay_ms);
    const trn::tools::Frame frame = sampler.sample();
    trn::tools::View view;
    view.width = width;
    for (const auto &line : trn::tools::render_top(frame, view)) std::printf("%s\n", line.c_str());
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

// The next process pid after `current` on the device (0 = all), wrapping.
int32_t next_process(const trn::tools::Frame &frame, size_t device, int32_t current) {
  if (device >= frame.devices.size()) return 0;
  const auto &processes = frame.devices[device].snapshot.processes;
  if (processes.empty()) return 0;
  if (current == 0) return processes.front().pid;
  for (size_t i = 0; i + 1 < processes.size(); ++i)
    if (processes[i].pid == current) return processes[i + 1].pid;
  return 0;
}

int run_screen(uint32_t delay_ms) {
  initscr();
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  timeout(50);
  trn::tools::Sampler sampler;
  sampler.sample();
  trn::tools::View view;
  trn::tools::Frame frame;
  uint32_t waited = delay_ms;
  while (!g_stop.load()) {
    if (waited >= delay_ms) {
      frame = sampler.sample();
      waited = 0;
    }
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    view.width = static_cast<size_t>(cols);
    erase();
    const auto lines = trn::tools::render_top(frame, view);
    for (int row = 0; row < rows - 1 && row < static_cast<int>(lines.size()); ++row) {
      if (row == 0) attron(A_REVERSE);
      mvaddnstr(row, 0, lines[static_cast<size_t>(row)].c_str(), cols);
      if (row == 0) attroff(A_REVERSE);
    }
    mvaddnstr(rows - 1, 0, "q quit  d/<-/-> device  p process", cols);
    refresh();
    const int key = getch();
    waited += 50;
    if (key == 'q' || key == 'Q') break;
    const size_t devices = std::max<size_t>(1, frame.devices.size());
    if (key == 'd' || key == KEY_RIGHT) view.device = (view.device + 1) % devices;
    if (key == KEY_LEFT) view.device = (view.device + devices - 1) % devices;
    if (key == 'p') view.process = next_process(frame, view.device, view.process);
  }
  endwin();
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-top: live NeuronCore utilisation, memory and processes"};
  bool batch = false;
  uint32_t count = 0, delay_ms = 1000, width = 100;
  app.add_flag("-b,--batch", batch, "print plain text snapshots instead of a screen");
  app.add_option("-n,--count", count, "snapshots to print in batch mode (0: until interrupted)");
  app.add_option("-d,--delay-ms", delay_ms, "refresh period")->check(CLI::Range(50u, 3600000u));
  app.add_option("-w,--width", width, "line width in batch mode")->check(CLI::Range(40u, 1000u));
  app.set_version_flag("--version", std::string("trn-top ") + trn_get_version_string());
  CLI11_PARSE(app, argc, argv);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  return batch ? run_batch(delay_ms, count, width) : run_screen(delay_ms);
}
