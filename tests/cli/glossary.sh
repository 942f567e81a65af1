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
        # ... and, in a Chinese deck (slides/zh/), the other way round: "损失缩放（loss scaling）" (the Chinese just
        # before the parentheses ends with the term's 中文 or an "also")
        zh_pairs = r'([' + han + r']+) ?[(（]([A-Za-z][A-Za-z0-9 \-,，/、]*)[)）]'
        for m in (re.finditer(zh_pairs, line) if '/zh/' in '/' + path else ()):
            # the first part is the term: "自动混合精度（automatic mixed precision, AMP）"; "(seed, step, tensor)" is a list
            chinese, first = m.group(1), re.split(r'[,，/、]', m.group(2))[0].strip().lower()
            for english, canonical, accepted, rejected in by_length:
                if re.fullmatch(re.escape(english.lower()) + r'(s|es|d|ed)?', first):
                    if chinese not in titles and not any(chinese.endswith(a) for a in accepted):
                        print(f'{path}:{n}: "{chinese}（{m.group(2)}）": the course says {canonical} ({english}), see GLOSSARY.md')
                        bad += 1
                    break
sys.exit(1 if bad else 0)
PY
shopt -s nullglob
docs=(README.md tools/README.student.md labs/*/README.md slides/[0-9]*.md slides/zh/[0-9]*.md solutions/*.md)
out=$(python3 "$checker" "$ROOT" "${docs[@]}" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then echo "ok - glossary: ${#docs[@]} handouts, decks, solutions and READMEs use GLOSSARY.md's terms"
else echo "not ok - glossary: terms that are not GLOSSARY.md's"; sed 's/^/    /' <<<"$out" | head -40; fi
planted=$(mktemp -d)
printf '%s\n' 'Each rank runs a reduce-scatter (规约散射) of its bucket.' 'The loss scaling (损失放缩) trick.' \
  'Gradient accumulation (梯度累积) is fine.' > "$planted/deck.md"
mkdir -p "$planted/zh"
printf '%s\n' '每个进程对自己的桶做一次归约散射（reduce-scatter）。' '先做全规约（allreduce）再更新。' \
  '用动态损失放大（dynamic loss scaling）。' '梯度累积（gradient accumulation）和微批次（micro-batches）都对。' > "$planted/zh/deck.md"
check_output "glossary: the check catches a wrong pairing and a rejected word, and passes a right one" 1 \
  'deck.md:1: "reduce-scatter \(规约散射\)".*' python3 "$checker" "$ROOT" "$planted/deck.md"
check "glossary: ... and reports exactly those two lines (1 and 2)" bash -c \
  "[ \"\$(python3 '$checker' '$ROOT' '$planted/deck.md' | grep -o 'deck.md:[0-9]*' | sort -u | paste -sd' ')\" = 'deck.md:1 deck.md:2' ]"
check "glossary: in a Chinese deck, \"中文（English）\" with another Chinese and a rejected word are caught (lines 2, 3 only)" \
  bash -c "[ \"\$(python3 '$checker' '$ROOT' '$planted/zh/deck.md' | grep -o 'zh/deck.md:[0-9]*' | sort -u | paste -sd' ')\" = 'zh/deck.md:2 zh/deck.md:3' ]"

# Every handout opens with its Chinese section: in its first 15 lines a line "## 中文导读", then, in this order and
# before the next "## " heading (the English text), "### 目标", "### 练习", "### 完成标准" and "### 评分".
zh_checker=$(mktemp)
trap 'rm -f "$checker" "$zh_checker"; rm -rf "$planted"' EXIT
cat > "$zh_checker" <<'PY'
import sys
want = ['### 目标', '### 练习', '### 完成标准', '### 评分']
lacking = []
for path in sys.argv[1:]:
    lines = [l.rstrip('\n').rstrip() for l in open(path, encoding='utf-8')]
    why = None
    start = next((i for i, l in enumerate(lines[:15]) if l == '## 中文导读'), None)
    if start is None:
        why = 'no "## 中文导读" in its first 15 lines'
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith('## ')), len(lines))
        found = [l for l in lines[start + 1:end] if l in want]
        missing = [h for h in want if h not in found]
        if missing:
            why = 'its 中文导读 lacks ' + ', '.join('"%s"' % h for h in missing)
        elif found != want:
            why = 'its 中文导读 has ' + ', '.join(found) + ' out of order (want ' + ', '.join(want) + ')'
    if why:
        lacking.append(path)
        print(f'{path}: {why}')
sys.exit(1 if lacking else 0)
PY
handouts=(labs/lab[0-9]*-*/README.md)
out=$(python3 "$zh_checker" "${handouts[@]}" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then
  echo "ok - glossary: all ${#handouts[@]} handouts open with a 中文导读 (目标 / 练习 / 完成标准 / 评分)"
else
  echo "not ok - glossary: $(grep -c . <<<"$out") of ${#handouts[@]} handouts lack a complete 中文导读 at their top"
  sed 's/^/    /' <<<"$out" | head -40
fi
mkdir -p "$planted/labs/lab97-late" "$planted/labs/lab98-good" "$planted/labs/lab99-bad"
{ echo '# Lab 97: Planted (植入)'; for i in $(seq 15); do echo 'English text.'; done
  printf '%s\n' '## 中文导读' '### 目标' '### 练习' '### 完成标准' '### 评分' '## Goals'; } > "$planted/labs/lab97-late/README.md"
printf '%s\n' '# Lab 98: Planted (植入)' '' '## 中文导读' '' '导读。' '### 目标' '- a' '### 练习' '1. b' \
  '### 完成标准' '- c' '### 评分' 'd' '' '## Goals' > "$planted/labs/lab98-good/README.md"
printf '%s\n' '# Lab 99: Planted (植入)' '' '## 中文导读' '' '### 目标' '- a' '### 完成标准' '- c' '### 练习' \
  '1. b' '## Goals' '### 评分' 'd' > "$planted/labs/lab99-bad/README.md"
check_output "glossary: the 中文导读 check names a handout whose section is out of order or cut short" 1 \
  'lab99-bad/README.md: its 中文导读 lacks "### 评分"' python3 "$zh_checker" "$planted"/labs/*/README.md
check "glossary: ... and one whose section starts after line 15, passes a complete one, and names only the bad two" \
  bash -c "python3 '$zh_checker' '$planted/labs/lab98-good/README.md' && [ \"\$(python3 '$zh_checker' \
  '$planted'/labs/*/README.md | grep -o 'lab9[0-9]-[a-z]*' | paste -sd' ')\" = 'lab97-late lab99-bad' ]"
