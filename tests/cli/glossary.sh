#!/usr/bin/env bash
# glossary.sh: one idea, one Chinese name. Every handout, deck, solution and README gives a glossary term's Chinese
# as GLOSSARY.md says: "English (中文)" uses its 中文 (or an accepted alternative), and no rejected word appears.
# Then the check itself is shown to catch a planted variant.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
checker=$(mktemp)
trap 'rm -f "$checker"; rm -rf "$planted"' EXIT
cat > "$checker" <<'PY'
import re, sys, glob
root = sys.argv[1]
files = sys.argv[2:]
han = '\u4e00-\u9fff'
terms = []  # (english, canonical, accepted set, rejected list)
for line in open(root + '/GLOSSARY.md', encoding='utf-8'):
    cells = [c.strip() for c in line.strip().strip('|').split('|')]
    if len(cells) != 4 or cells[0] == 'English' or not re.search('[' + han + ']', cells[1]):
        continue
    split = lambda c: [w.strip() for w in c.split(',') if w.strip()]
    terms.append((cells[0], cells[1], {cells[1], *split(cells[2])}, split(cells[3])))
# A chapter's Chinese title may follow any English words (the chapter named in English, then in Chinese).
titles = set(re.findall(r'\(([^()]*[' + han + r'][^()]*)\) \|', open(root + '/README.md', encoding='utf-8').read()))
for c in glob.glob(root + '/labs/lab*/lab.json'):
    m = re.search(r'"title_zh": *"([^"]+)"', open(c, encoding='utf-8').read())
    if m: titles.add(m.group(1))
by_length = sorted(terms, key=lambda t: -len(t[0]))
bad = 0
for path in files:
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        for english, canonical, accepted, rejected in terms:
            for word in rejected:
                if word in line:
                    print(f'{path}:{n}: "{word}": the course says {canonical} ({english}), see GLOSSARY.md')
                    bad += 1
        for m in re.finditer(r'([A-Za-z][A-Za-z0-9 \-]*?) ?[(（]([A-Za-z0-9]*[' + han + r'][^()（）]*)[)）]', line):
            before, chinese = m.group(1).lower(), m.group(2)
            if chinese in titles:
                continue
            for english, canonical, accepted, rejected in by_length:
                e = english.lower()
                if re.search(r'(^|[^a-z0-9\-])' + re.escape(e) + r'(s|es|d|ed)?$', before):
                    # "(中文, lab 04)", "(进程/秩)": one of the parts is the term
                    parts = [w.strip() for w in re.split(r'[,，/、]', chinese)]
                    # ... or a longer phrase ends with it (检测第一个非有限张量: "detecting the first bad tensor")
                    if not any(w.endswith(a) for w in parts for a in accepted):
                        print(f'{path}:{n}: "{english} ({chinese})": the course says {canonical}, see GLOSSARY.md')
                        bad += 1
                    break
sys.exit(1 if bad else 0)
PY
docs=(README.md tools/README.student.md labs/*/README.md slides/[0-9]*.md solutions/*.md)
out=$(python3 "$checker" "$ROOT" "${docs[@]}" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then echo "ok - glossary: ${#docs[@]} handouts, decks, solutions and READMEs use GLOSSARY.md's terms"
else echo "not ok - glossary: terms that are not GLOSSARY.md's"; sed 's/^/    /' <<<"$out" | head -40; fi
planted=$(mktemp -d)
printf '%s\n' 'Each rank runs a reduce-scatter (规约散射) of its bucket.' 'The loss scaling (损失放缩) trick.' \
  'Gradient accumulation (梯度累积) is fine.' > "$planted/deck.md"
check_output "glossary: the check catches a wrong pairing and a rejected word, and passes a right one" 1 \
  'deck.md:1: "reduce-scatter \(规约散射\)".*' python3 "$checker" "$ROOT" "$planted/deck.md"
check "glossary: ... and reports exactly those two lines (1 and 2)" bash -c \
  "[ \"\$(python3 '$checker' '$ROOT' '$planted/deck.md' | grep -o 'deck.md:[0-9]*' | sort -u | paste -sd' ')\" = 'deck.md:1 deck.md:2' ]"
