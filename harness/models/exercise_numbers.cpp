#include "harness/models/exercise_numbers.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

const char* kTypes[] = {"float32", "bfloat16", "float64"};
const long kTypeBytes[] = {4, 2, 8};

std::string fraction(long p, long q) {
  const long g = std::gcd(p, q);
  return std::to_string(p / g) + "/" + std::to_string(q / g);
}

// One dim's block on a device: the dim cut over `axes` (first axis most significant), the device
// at `coord` on each axis of `sizes`.
std::string dim_range(long extent, const std::vector<int>& axes, const std::vector<long>& sizes,
                      const std::vector<long>& coord) {
  long index = 0, parts = 1;
  for (int a : axes) {
    index = index * sizes[a] + coord[a];
    parts *= sizes[a];
  }
  const long block = extent / parts;
  return std::to_string(index * block) + ":" + std::to_string((index + 1) * block);
}

// Lesson 01: a 2-D mesh and a spec of A [i, k]; which block device d holds, or how many copies.
NumberExercise block_map(int which, int variant) {
  struct Spec {
    const char* text;
    std::vector<int> rows, cols;  // axes (0 = X, 1 = Y) cutting each dim, in order
  };
  const Spec specs[] = {{"X,Y", {0}, {1}},   {"Y,X", {1}, {0}},   {"(X,Y),_", {0, 1}, {}},
                        {"_,(Y,X)", {}, {1, 0}}, {"X,_", {0}, {}}, {"_,Y", {}, {1}}};
  const std::vector<long> sizes = variant % 2 ? std::vector<long>{4, 2} : std::vector<long>{2, 4};
  const Spec& s = specs[(which * 3 + variant) % 6];
  const long scale = 1 + variant / 3, rows = 8 * scale, cols = 16 * scale, devices = sizes[0] * sizes[1];
  const std::string mesh = "X=" + std::to_string(sizes[0]) + ",Y=" + std::to_string(sizes[1]);
  NumberExercise e;
  e.mesh = mesh;
  e.spec = s.text;
  e.sizes = {{"rows", rows}, {"cols", cols}};
  std::ostringstream q;
  q << "  mesh " << mesh << " (" << devices << " devices; device d sits at X = d / " << sizes[1] << ", Y = d % "
    << sizes[1] << ")\n  A global [" << rows << ", " << cols << "], spec " << s.text
    << " (an axis in a dim's place cuts that dim;\n  (X,Y) cuts it over both, the first axis's parts outermost)\n";
  if (which == 0) {
    const long d = (3 * variant + 5) % devices;
    const std::vector<long> coord = {d / sizes[1], d % sizes[1]};
    e.sizes["device"] = d;
    e.topic = "which block of A a device holds";
    q << "  Which rows and columns of A does device " << d << " hold?\n  Answer as: rows a:b; cols c:d\n";
    e.keys = {"rows", "cols"};
    e.right = {dim_range(rows, s.rows, sizes, coord), dim_range(cols, s.cols, sizes, coord)};
    e.why = {"device " + std::to_string(d) + " is at X = " + std::to_string(coord[0]) + ", Y = " + std::to_string(coord[1]) +
                 "; its index along the dim's axes picks the block",
             "the same for the columns; a dim no axis cuts is whole"};
  } else {
    long parts = 1;
    for (int a : s.rows) parts *= sizes[a];
    for (int a : s.cols) parts *= sizes[a];
    e.topic = "how many distinct blocks, and how many devices hold each";
    q << "  How many distinct blocks of A are there, how many devices hold each, and how many\n"
         "  elements does one device hold?\n  Answer as: blocks n; copies n; elements n\n";
    e.keys = {"blocks", "copies", "elements"};
    e.right = {std::to_string(parts), std::to_string(devices / parts), std::to_string(rows * cols / parts)};
    e.why = {"the product of the sizes of the axes the spec names", "devices / blocks: axes it does not name replicate",
             "the global size / blocks"};
  }
  e.question = q.str();
  return e;
}

// Lesson 16: GPipe's bubble and stash against 1F1B's, or the interleaved schedule's bubble and
// messages.
NumberExercise pipeline(int which, int variant) {
  NumberExercise e;
  std::ostringstream q;
  if (which == 0) {
    const long P[] = {2, 4, 4, 8, 3, 4}, M[] = {4, 8, 6, 8, 5, 2};
    const long p = P[variant], m = M[variant], s = variant % p;
    e.sizes = {{"P", p}, {"m", m}, {"stage", s}};
    e.topic = "GPipe's bubble, and the activations GPipe and 1F1B stash";
    q << "  " << p << " pipeline stages, " << m << " micro-batches a step, a forward and a backward each one tick\n"
      << "  What share of the step is the bubble (idle), and how many micro-batches' activations\n"
      << "  does stage " << s << " hold at its peak under GPipe, and under 1F1B?\n"
      << "  Answer as: bubble p/q; stash_gpipe n; stash_1f1b n\n";
    e.keys = {"bubble", "stash_gpipe", "stash_1f1b"};
    e.right = {fraction(p - 1, m + p - 1), std::to_string(m), std::to_string(std::min(p - s, m))};
    e.why = {"(P-1)/(m+P-1), the same for 1F1B: it reorders the work, not the fill and drain",
             "every forward runs before any backward: all m", "min(P-s, m): a backward frees each stash soon"};
  } else {
    const long P[] = {2, 4, 4, 2, 4, 2}, M[] = {4, 4, 8, 6, 8, 2}, V[] = {2, 2, 3, 4, 2, 3};
    const long p = P[variant], m = M[variant], v = V[variant], s = (variant + 1) % p;
    e.sizes = {{"P", p}, {"m", m}, {"v", v}, {"stage", s}};
    e.topic = "the interleaved schedule: a smaller bubble for more messages";
    q << "  " << p << " devices, each holding v = " << v << " model chunks (interleaved 1F1B), " << m
      << " micro-batches a step\n"
      << "  What share of the step is the bubble, and how many point-to-point messages does device " << s << "\n"
      << "  send in a step (activations forward, gradients back)?\n  Answer as: bubble p/q; messages n\n";
    e.keys = {"bubble", "messages"};
    e.right = {fraction(p - 1, v * m + p - 1), std::to_string(m * ((v - (s == p - 1)) + (v - (s == 0))))};
    e.why = {"(P-1)/(v m + P-1): the fill and drain take P-1 ops of 1/v the size",
             "per micro-batch one out of each model chunk but the model's last, one back from each but its first"};
  }
  e.question = q.str();
  return e;
}

// Lesson 19: ring attention's shifts and bytes.
NumberExercise ring(int variant) {
  const long N[] = {4, 8, 2, 4, 8, 3}, S[] = {64, 128, 32, 256, 64, 48}, D[] = {16, 8, 32, 8, 16, 16};
  const long n = N[variant], tokens = S[variant], d = D[variant], eb = kTypeBytes[variant % 3];
  const long block = tokens / n * d * eb;  // one device's K (or V) rows
  NumberExercise e;
  e.sizes = {{"n", n}, {"S", tokens}, {"d", d}, {"element_bytes", eb}};
  e.topic = "ring attention: shifts and bytes per device";
  std::ostringstream q;
  q << "  A ring of " << n << " devices, one causal head of size d = " << d << ", S = " << tokens << " tokens, "
    << kTypes[variant % 3] << " (" << eb << " B)\n  Each device keeps S/n queries; K and V go round the ring.\n"
    << "  How many shifts does the forward make, and how many bytes does one device send in the\n"
    << "  forward (K and V) and in the backward (K, V and their gradients dK, dV)?\n"
    << "  Answer as: shifts n; forward bytes; backward bytes\n";
  e.question = q.str();
  e.keys = {"shifts", "forward", "backward"};
  e.right = {std::to_string(n - 1), std::to_string(2 * (n - 1) * block), std::to_string((4 * (n - 1) + 2) * block)};
  e.why = {"n - 1: after them every block has visited every device",
           "2(n-1) blocks of [S/n, d]: K and V, n - 1 shifts each",
           "(4(n-1)+2) blocks: K and V n - 1 times, dK and dV n times (one more brings them home)"};
  return e;
}

// Lesson 20: an expert's capacity and an AllToAll's bytes.
NumberExercise experts(int variant) {
  const long E[] = {8, 8, 16, 4, 8, 16}, K[] = {2, 1, 2, 2, 2, 1}, G[] = {32, 64, 32, 16, 48, 64},
             N[] = {2, 4, 4, 2, 4, 8}, M[] = {8, 16, 8, 8, 16, 8};
  const double F[] = {1.0, 1.25, 2.0, 1.0, 1.5, 1.0};
  const long experts = E[variant], k = K[variant], g = G[variant], n = N[variant], m = M[variant];
  const long eb = kTypeBytes[variant % 3];
  const long c = std::max(1L, static_cast<long>(std::ceil(F[variant] * k * g / experts)));
  NumberExercise e;
  e.sizes = {{"experts", experts}, {"top_k", k}, {"tokens", g}, {"n", n}, {"m", m}, {"factor", F[variant]},
             {"element_bytes", eb}};
  e.topic = "MoE: an expert's capacity and the dispatch AllToAll's bytes";
  std::ostringstream q;
  q << "  " << experts << " experts over " << n << " devices, top-" << k << " routing, " << g
    << " tokens a device, capacity factor " << format_number(F[variant], "%g") << ",\n  model width m = " << m
    << ", " << kTypes[variant % 3] << " (" << eb << " B)\n"
    << "  How many slots C does each expert take from one device's tokens, and how many bytes does\n"
    << "  a device send in the AllToAll that dispatches them?\n  Answer as: capacity n; bytes n\n";
  e.question = q.str();
  e.keys = {"capacity", "bytes"};
  e.right = {std::to_string(c), std::to_string((n - 1) * experts * c * m * eb / n)};
  e.why = {"ceil(factor x top_k x tokens / experts)",
           "(n-1)/n of the [E, C, m] buffer: empty slots travel too, the device's own part stays"};
  return e;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "3/7" or "0.4286" as a number; NaN when it is neither.
double number_value(const std::string& text) {
  const auto slash = text.find('/');
  char* end = nullptr;
  if (slash == std::string::npos) {
    const double v = std::strtod(text.c_str(), &end);
    return end && *end == '\0' && !text.empty() ? v : NAN;
  }
  const double p = number_value(text.substr(0, slash)), q = number_value(text.substr(slash + 1));
  return q != 0 ? p / q : NAN;
}

bool same_value(const std::string& right, std::string given) {
  if (right.find(':') != std::string::npos) return given == right;
  if (right.find('/') != std::string::npos) return std::fabs(number_value(given) - number_value(right)) <= 5e-4;
  if (given.size() > 1 && (given.back() == 'B' || given.back() == 'b')) given.pop_back();
  return !given.empty() && std::all_of(given.begin(), given.end(), ::isdigit) && given == right;
}

}  // namespace

int number_exercise_count(const std::string& lesson) {
  if (lesson == "01" || lesson == "16") return 2;
  if (lesson == "19" || lesson == "20") return 1;
  return 0;
}

NumberExercise number_exercise(const std::string& lesson, int which, int variant, const std::string& id) {
  NumberExercise e = lesson == "01" ? block_map(which, variant)
                     : lesson == "16" ? pipeline(which, variant)
                     : lesson == "19" ? ring(variant)
                                      : experts(variant);
  e.id = id;
  e.lesson = lesson;
  e.question = "Exercise " + id + " (lesson " + lesson + "): " + e.topic + "\n" + e.question;
  return e;
}

NumberAnswer parse_number_answer(const std::string& text) {
  std::string flat = text;
  std::replace(flat.begin(), flat.end(), '\n', ';');
  NumberAnswer out;
  for (const std::string& part : split(flat, ';')) {
    std::string item = trim(part);
    if (item.empty() || lower(item) == "none" || lower(item) == "nothing") continue;  // graded as no answer
    std::replace(item.begin(), item.end(), '=', ' ');
    std::istringstream in(item);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words.size() != 2 || !is_identifier(words[0]))
      throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' is not understood; write <name> <value>, "
                                    "like rows 4:8 or bubble 3/7");
    for (char c : words[1])
      if (!std::isdigit(static_cast<unsigned char>(c)) && c != ':' && c != '/' && c != '.' && c != 'B' && c != 'b')
        throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' gives '" + excerpt(words[1], 20) +
                                          "'; a value is a number, a fraction p/q or a range a:b");
    out.emplace_back(lower(words[0]), words[1]);
  }
  return out;
}

NumberGrade grade_numbers(const NumberExercise& e, const NumberAnswer& given) {
  NumberGrade g;
  std::vector<bool> named(e.keys.size(), false);
  auto pad = [](const std::string& t) { return t.size() < 34 ? t + std::string(34 - t.size(), ' ') : t + "  "; };
  for (const auto& [key, value] : given) {
    const auto at = std::find(e.keys.begin(), e.keys.end(), key);
    const std::string shown = "  " + pad(key + " " + value);
    if (at == e.keys.end() || named[at - e.keys.begin()]) {
      g.lines.push_back(shown + "wrong: the exercise asks " + join(e.keys, ", ") + ", each once");
      ++g.wrong;
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(at - e.keys.begin());
    named[i] = true;
    const bool ok = same_value(e.right[i], value);
    g.lines.push_back(shown + (ok ? "right" : "wrong: it is " + e.right[i]));
    ++(ok ? g.right : g.wrong);
  }
  for (std::size_t i = 0; i < e.keys.size(); ++i)
    if (!named[i]) {
      g.lines.push_back("  " + pad("(not named)") + "missed: " + e.keys[i] + " " + e.right[i]);
      ++g.missed;
    }
  return g;
}

std::string number_answer_text(const NumberExercise& e) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < e.keys.size(); ++i) parts.push_back(e.keys[i] + " " + e.right[i]);
  return join(parts, "; ");
}

}  // namespace shardlab
