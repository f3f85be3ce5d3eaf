"""What a user message says about the assistant reply just before it (English lexicon of D5).

Friction is what people rate as dissatisfaction with a reply: the user corrects a detail the
assistant got wrong or disputes what it said, reminds it of something already said, asks it to try
again after it failed, repeats a request, shows annoyance at the assistant, or asks for a human
without being offered one. Thanks, exclamation marks, closings and declined offers are not friction.
Every function here is a precompiled regex or a small predicate over plain text.
"""

from __future__ import annotations

import re

from tracing_eval.text import Folded, alternatives, could_match, factor_boundaries, holds_any, sentences


class Cue(Folded):
    """A `Folded` pattern searched in two steps, with the same match: the whole pattern at the start
    of the text, then from the next position on only its alternatives that `^` does not anchor (they
    cannot match there). Without those, the `\\b` that leads the others is tested once per position
    (`factor_boundaries`) rather than once per run between two anchored alternatives: a search is 2-3
    times faster on the long cue lists."""

    __slots__ = ("later_ascii", "later_unicode")

    def __init__(self, source: str) -> None:
        super().__init__(source)
        unanchored = [a for a in alternatives(source) if not a.startswith("^")]
        if not unanchored:
            raise ValueError("every alternative is anchored: use Folded")
        later = factor_boundaries("|".join(unanchored))
        self.later_ascii = re.compile(later)
        self.later_unicode = re.compile(later, re.IGNORECASE)

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        if pos:
            return super().search(text, pos)
        if text.isascii():
            return self.search_lower(text.lower())
        return self.unicode.match(text) or self.later_unicode.search(text, 1)

    def search_lower(self, low: str) -> re.Match[str] | None:
        return self.ascii.match(low) or self.later_ascii.search(low, 1)


#: the user rejects or disputes what the reply said, did or assumed (no context needed)
DISPUTE = Cue(
    r"\b(?:(?:that|this|it|which|those|these)(?:'s|\s+is|\s+was|\s+are|\s+were)\s+(?:not|n't)|isn'?t|wasn'?t|aren'?t)"
    r"\s+(?:(?:quite|exactly|entirely)\s+)?(?:right|correct|true|accurate|what i|the (?:one|right|correct)"
    r"|the\s+(?:\w+\s+){1,2}?i\s+(?:wanted|asked|requested|said|meant|chose|booked|ordered|needed))\b"
    r"|\bi\s+don'?t\s+think\s+you\s+(?:understood|understand|got\s+it|get\s+it|heard\s+me)\b"
    r"|\bnot what i (?:asked|said|wanted|meant|requested|need(?:ed)?|ordered|booked|chose)\b"
    r"|\b(?:that'?s|it'?s|this is|that is|it is|you(?:'re| are)|you(?:'ve)? got (?:it|that|this))\s+"
    r"(?:(?!not\b|never\b)\w+\s+)?(?:wrong|incorrect|mistaken)\b"
    r"|\b(?:that'?s|that is|this is|it'?s|it is)\s+(?:(?:just|simply|completely|totally)\s+)?(?:false|untrue)\s*(?:[.!,]|$)"
    # "wrong", "totally wrong", "no, wrong file"; not a question ("wrong number? no, it's right")
    r"|^\W*(?:(?:no|nope|nah|still|all|totally|completely|again|ugh|hmm)\W+){0,2}(?:wrong|incorrect)\b"
    r"(?![\w\s]*\?(?!\?))"
    r"|\byou\s+(?:didn'?t|did not|never)\s+(?:even\s+)?do\s+what\s+i\s+(?:asked|said|wanted|told\s+you|requested)\b"
    r"|\byou (?:misunderstood|misheard|misread|mixed (?:it|that|them|things) up|got (?:it|that|this) wrong)\b"
    r"|\byou(?:'ve)?\s+got\s+(?:the|my|our|his|her|their)\s+(?:\w+\s+){0,2}?wrong\b"
    r"|\byou(?:'ve|\s+have)?\s+(?:booked|reserved|picked|chose|chosen|selected|entered|put\s+(?:down|in)|ordered"
    r"|added|sent|gave\s+me|given\s+me|charged|changed|edited|modified|updated|deleted|removed|opened|used|called"
    r"|imported|fixed|cancel+ed)\s+(?:me\s+)?(?:for\s+)?(?:the|a)\s+wrong\b"
    # what the reply did made things worse: "you broke it", "you made it worse", "now it's even worse"
    r"|\byou(?:'ve|\s+have)?\s+(?:just\s+|now\s+)?(?:broke|broken)\s+(?:it|this|that|everything|something|my|the)\b"
    r"|\byou(?:'ve|\s+have)?\s+(?:just\s+|now\s+)?made\s+(?:it|this|that|things|everything)\s+(?:even\s+|much\s+)?worse\b"
    r"|\bnow\s+(?:it|this|that)(?:'s|\s+is)\s+(?:even\s+|much\s+)?worse\b|\b(?:it|this|that)(?:'s|\s+is)\s+(?:\w+\s+)?worse\s+now\b"
    r"|\byou(?:'re|\s+are|'ve|\s+have)?\s+(?:just\s+)?(?:made|making)\s+(?:that|this|it|things|stuff)\s+up\b"
    r"|\b(?:that'?s|that is|this is)\s+(?:all\s+|just\s+)?made\s+up\b"
    r"|\b(?:that|this|it)(?:'s|\s+is|\s+was)\s+not\s+my\s+(?:order|address|name|number|e-?mail|account|flight|booking"
    r"|reservation|seat|ticket|package|parcel|file|code|question|request)\b"
    r"|^\W*(?:(?:no|nope|nah|still)\W+)?not\s+(?:the\s+)?(?:right|correct)(?:\s+answer)?\s*(?:[.!,]|$)"
    r"|^\W*(?:(?:but|still|hmm|nope|no)\W+)?nothing\s+(?:has\s+)?(?:changed|happened)\s*[.!]*\s*$"
    r"|^\W*(?:(?:it|that|this|still|nope|no)\W+)?(?:still\s+)?(?:doesn'?t|does not|won'?t)\s+(?:even\s+)?compile\b"
    r"|^\W*(?:(?:no|nope|nah|hmm|but)\W+)?(?:it'?s\s+|it\s+is\s+)?still\s+the\s+same"
    r"(?:\s+(?:thing|result|output|answer|error|problem|issue))?\s*(?:[.!,;]|$)"
    r"|\byou(?:'re|\s+are)\s+(?:still\s+)?getting\s+(?:it|that|this|(?:the|my)\s+\w+)\s+wrong\b"
    r"|\bstill\s+(?:not|isn'?t)\s+(?:right|correct|what i)\b"
    r"|^\W*(?:\w+\W+)?(?:that|this|it)\s+(?:makes\s+no|doesn'?t\s+make(?:\s+any)?|does\s+not\s+make(?:\s+any)?)"
    r"\s+sense\s*(?:[.!?]|$)"
    r"|\b(?:there must (?:be|have been)|there(?:'s| is|'s been| has been| was| seems to be)) (?:a |an |some )?(?:\w+ )?"
    r"(?:mistake|error|misunderstanding|mix-?up|confusion)\b"
    r"|\bi (?:never|did ?n'?t|did not) (?:say|said|ask|asked|want|wanted|request|requested|choose|book)\b"
    r"|\bare you sure\b|\bthat can'?t be (?:right|correct|true)\b|\bi don'?t believe (?:you|that|it)\b"
    r"|\bwhy would you (?:even )?(?:say|think|suggest|recommend|do) (?:that|this|it)\b"
    # what the reply offers or states does not do: "That won't work for me", "No, that's not good"
    r"|^\W*(?:\w+\W+)?(?:that|this)\s+(?:won'?t|will not|doesn'?t|does not|wouldn'?t|would not"
    r"|isn'?t going to|is not going to)\s+work\b|^\W*(?:\w+\W+)?(?:that|this)(?:'s|\s+is)\s+not\s+(?:good|ok|okay)\b"
    # what the reply gave did not work: "That didn't work", "This code doesn't even compile", "Same error"
    r"|^\W*(?:\w+\W+)?(?:that|this)(?:\s+(?:code|fix|command|solution|script|query|one))?\s+(?:still\s+)?"
    r"(?:didn'?t|did not|doesn'?t|does not)\s+(?:even\s+|really\s+)?(?:work|compile|run|fix|solve)\b"
    r"|\byou\s+(?:didn'?t|did not|haven'?t|have not)\s+(?:\w+\s+)?(?:fix|fixed|solve|solved)\b"
    # terse: "didn't work", "I tried it, it didn't work", "didn't fix it" (not "it didn't run on Sunday")
    r"|^\W*(?:(?:no|nope|nah|but|still|sorry|hmm|ugh|well|(?:i\s+)?tried(?:\s+(?:it|that|this))?)\W+){0,2}"
    r"(?:(?:it|that|this)\s+)?(?:still\s+)?(?:didn'?t|did not)\s+(?:even\s+|really\s+)?(?:work|compile|run|fix|solve)\w*"
    r"(?:\s+(?:it|anything|either|at\s+all|for\s+me|again|anymore|the\s+(?:issue|problem|bug|error)))?\s*(?:[.!,;:]|$)"
    # "still doesn't work", "it still won't compile", "still not working" (not "is the pool still not working?")
    r"|^\W*(?:(?:no|nope|nah|but|sorry|hmm|ugh|well)\W+)?still\s+(?:doesn'?t|does not|won'?t|will not|isn'?t|is not"
    r"|not|can'?t)\s+(?:even\s+)?(?:work|compile|run|load|build|start|open|connect)\w*\b"
    r"|\b(?:it|that|this)\s+still\s+(?:doesn'?t|does not|won'?t|will not|can'?t)\s+(?:even\s+)?"
    r"(?:work|compile|run|load|build|start|open|connect)\w*\b"
    r"|^\W*(?:\w+\W+)?(?:(?:it|this|that)(?:'s|\s+is)\s+)?still\s+(?:broken|crash|fail|throw|break|error)\w*\b"
    r"|\b(?:i\s+)?(?:still\s+)?(?:get|got|getting|see|seeing)\s+the\s+same\s+(?:error|exception|traceback)\b"
    r"|\bstill\s+(?:getting|seeing)\s+(?:an?\s+|the\s+|this\s+|that\s+)?(?:error|exception)s?\b"
    r"|\bthe\s+(?:same\s+)?(?:error|exception|bug)\s+is\s+still\s+(?:there|here|happening|showing)\b"
    # the gate's pieces are the whole "same error" (a bare "same" is in too many messages)
    r"|\bstill\s+(?:getting|seeing|having|the)\s+(?:the\s+)?"
    r"(?:same error|same problem|same issue|same bug|same result|same output)\b"
    r"|^\W*(?:\w+\W+)?(?:same error|same problem|same issue|same bug)\b",
)
#: what the user said elsewhere, not in this conversation: "as I said on the phone", "like I said in my email"
_ELSEWHERE = r"(?!\s+(?:in|on|over)\s+(?:my|the|an?|our)\s+(?:e-?mail|mail|phone|call|form|letter|ticket|voicemail)\b)"
#: the user restates something the assistant should already know
REMINDER = Cue(
    r"\bi (?:already|just) (?:told|said|gave|sent|provided|explained|answered|mentioned|asked|did)\b"
    r"|\byou (?:already|just) (?:asked|said|told)\b|^\W*(?:once\s+)?again,\s+(?!thank|bye|good\s*bye)"
    r"|\b(?:as|like) i (?:already |just )?(?:said|told you|mentioned|asked|explained|wrote)\b"
    + _ELSEWHERE
    + r"|\bi (?:said|asked for|told you)\b"
    + _ELSEWHERE
    + r"|\bi(?:'ve| have| had)?\s+(?:to\s+)?(?:tell|say|repeat|explain|give|type|send|ask)\w*(?:\s+\w+){0,4}\s+again\b"
    r"|\bagain and again\b|\bfor the (?:second|third|fourth|fifth|last|\d+(?:st|nd|rd|th)) time\b"
    r"|\b(?:this|that|it)(?:'s|\s+is)\s+the\s+(?:second|third|fourth|fifth|\d+(?:nd|rd|th))\s+time\s+"
    r"(?:(?:that\s+)?i(?:'ve|'m|\s+am|\s+have)?\s+)?(?:ask|asked|asking|told|telling|said|saying|typed|typing"
    r"|explained|explaining|repeated|repeating)\b"
    r"|\bi(?:'ve|\s+have)\s+(?:told\s+you|said|given|explained|asked|sent)\b[^.?!]{0,40}?\balready\b"
    r"|\bi(?:'ve|\s+have)?\s+(?:gave\s+you|given\s+you|sent\s+you|asked\s+you|asked\s+(?:this|that))\b[^.?!]{0,40}?"
    r"\balready\b|\bi(?:'ve|\s+have)\s+already\s+(?:told\s+you|said\s+(?:that|this|it|so)|given\s+you|explained|answered"
    r"|mentioned|asked\s+(?:you|this|that))\b"
    r"|\b(?:second|third|fourth|fifth|\d+(?:nd|rd|th))\s+time\s+(?:i'?m\s+|i\s+am\s+|i'?ve\s+|i\s+have\s+)?"
    r"(?:asking|telling|saying|typing|explaining)\b"
    r"|\bi(?:'ve|\s+have)?\s+(?:already\s+)?(?:told|said|asked|explained)(?:\s+(?:you|it|this|that)){0,2}\s+"
    r"(?:two|three|four|five|several|many|multiple|\d+)\s+times\b"
    r"|\bhow many (?:more )?times (?:do i (?:have|need) to|must i|will i have to|have i)\s+(?:\w+\s+)?"
    r"(?:tell|say|said|told|repeat|explain|ask|asked|type|give|send|spell|write)\b",
)
#: the user asks the assistant to redo what it just did
RETRY = Folded(
    r"\b(?:try|check|search|look|find|book|reserve|run|do|look\s+it\s+up)\w*(?:\s+\S+){0,4}\s+again\b"
    r"|\b(?:re-?check|retry|re-?try|double[- ]check|try harder|keep (?:looking|searching|trying))\b"
    r"|\byet again\b",
)
#: the message asks for something (a question or an imperative), not a plan ("I might book it again later")
REQUEST = Folded(
    r"\b(?:can|could|would|will) (?:you|we)\b|\bplease\b|\blet'?s\b|\?"
    r"|^\W*(?:\w+\W+)?(?:try|check|search|look|find|book|re-?check|retry|double[- ]check)\b",
)
#: a reply that reports a failure or an empty result: a retry request after it disputes the failure
FAILURE_REPLY = Folded(
    r"\bsorry\b|\bunfortunately\b|\bapologi[sz]e|\bunable\b|\bcould(?:n'?t| not)\b|\bcan(?:'?t|not)\b"
    r"|\b(?:was|were|is|are)(?:n'?t| not)\s+(?:able|possible|available|successful)\b"
    r"|\b(?:failed|unsuccessful|did(?:n'?t| not) go through)\b"
    r"|\bno\s+(?:\w+\s+)?(?:results?|matches|match|availability|options?|records?|flights?|seats?|tables?|rooms?)\b"
    r"|\b(?:nothing|none)\b|\bnot (?:find|found|locate)\b",
)
#: annoyance aimed at the assistant or the conversation (not at the world: "my flight was delayed")
ANNOYANCE = Cue(
    # not at oneself: "stupid me", "I'm so dumb, I forgot", "sorry for the dumb question"
    # (the look-ahead first: the look-behinds then run only where such a word starts; the `\b` before it
    # joins the one test of `factor_boundaries`)
    r"\b(?=(?:useless|pathetic|incompetent|hopeless|stupid|dumb)\b)"
    r"(?<!i'm )(?<!i am )(?<!i'm so )(?<!i am so )(?<!i feel )(?<!i feel so )"
    r"(?:useless|pathetic|incompetent|hopeless|stupid|dumb)\b(?!\s+(?:me|of me|questions?|mistake|typo)\b)"
    r"|\b(?:this|that|it)(?:'s|\s+is|\s+was)\s+(?:\w+\s+){0,2}"
    r"(?:frustrating|annoying|ridiculous|absurd|unacceptable|unhelpful|not helpful|not helping|a joke)\b"
    r"|\bwaste of (?:my )?time\b|\bwasting (?:my|our) time\b|\bare you (?:kidding|joking|serious)\b"
    r"|\bare you (?:even )?(?:listening|reading)\b(?!\s+to\b(?!\s+me\b))"
    r"|\byou(?:(?:'re| are)\s+(?:\w+\s+)?not|\s+aren'?t)\s+(?:being\s+)?(?:very\s+)?(?:listening|helping|helpful"
    r"|understanding|making sense|getting it)\b"
    r"|\byou (?:still\s+)?(?:don'?t|do not|didn'?t|did not|never|can'?t|cannot) (?:\w+ )?"
    r"(?:understand|get it|listen|read|help)\b"
    r"|\bwhy (?:can'?t|don'?t|won'?t) you (?:\w+ )?(?:understand|listen|help|just|answer)\b"
    r"|\byou(?:'ve|\s+have|'re|\s+are)?\s+(?:just\s+|completely\s+|totally\s+|still\s+)?(?:ignored|ignoring)\s+"
    r"(?:me|my|what\s+i|the\s+(?:instructions?|requirements?))\b"
    # terse: "didn't help", "not helpful at all", "this is pointless", "read my question again"
    r"|^\W*(?:(?:no|nope|nah|sorry|still|but|ugh|hmm|well)\W+)?(?:didn'?t|did not|doesn'?t|does not)\s+(?:really\s+)?"
    r"help(?:\s+(?:me|us|at all|much|either))*\s*(?:[.!]|$)"
    r"|^\W*(?:(?:that|this|it)(?:'s|\s+is|\s+was)\s+)?(?:(?:very|so|really|totally|completely|just)\s+)?"
    r"(?:not\s+(?:very\s+|really\s+|that\s+)?(?:helpful|useful)|unhelpful|pointless)(?:\s+at\s+all)?\s*(?:[.!,;]|$)"
    r"|\b(?:re-?)?read my (?:\w+\s+)?(?:question|message|request|prompt|post|msg|instructions?)s?\s+"
    r"(?:again|(?:more\s+)?carefully|properly)\b"
    # interjections: the whole message ("ugh", "come on!", "again??", "not again"), or opening a complaint
    r"|^\W*(?:oh\s+)?(?:come\s+on|ugh|argh|smh|omfg|jeez|geez|sigh)\W*$"
    r"|^\W*(?:ugh|argh|smh)\W+(?:no|nope|not again|again|wrong|seriously|still|this again)\b"
    r"|^\W*(?:(?:seriously|ugh|oh|what|really)\W+)?(?:not\s+)?again ?(?:\? ?[?!]|!)[?!\s]*$|^\W*not again\b"
    r"|\bfor (?:god'?s|christ'?s|heaven'?s|pete'?s|fuck'?s) sake\b"
    r"|\byou(?:'ve| have)?\s+(?:just\s+|completely\s+)?failed\s+(?:me|again|to)\b|\b(?:again|nope),?\s+you\s+fail\b"
    r"|\bi (?:don'?t|do not) understand what you mean\b"
    r"|\b(?:that|this|it)\s+(?:(?:doesn'?t|does not|didn'?t|did not)\s+(?:help(?:\s+(?:me|us|at all|much))*\s*(?:[.!?]|$)"
    r"|answer\s+(?:my|the)\s+question\b)"
    r"|(?:isn'?t|wasn'?t)\s+(?:\w+\s+)?(?:helpful|helping|useful)(?:\s+at\s+all)?\s*(?:[.!?]|$))"
    r"|^\W*(?:\w+\W+)?seriously\s*\?"
    r"|\bwhy (?:do|are) you (?:still |always )?keep\w*\b"
    r"|\byou keep (?:asking|saying|repeating|telling|giving|getting|suggesting|recommending|showing|offering|sending)\b"
    r"|^\W*(?:\w+\W+)?(?:that|this|it)(?:'s|\s+is)\s+the\s+same\s+(?:\w+\s+){0,2}?(?:that\s+)?you\s+(?:already\s+)?"
    r"(?:suggested|recommended|showed|offered|gave|sent|said|wrote)\b"
    r"|\bstop (?:repeating|saying|asking)\b|\brepeating yourself\b|\bwtf\b|\bffs\b"
    r"|\bwhy (?:is|does|do) (?:it|this|that) still (?:not|fail|crash|break|throw|give|show)\w*"
    r"|\bwhy (?:isn'?t|doesn'?t) (?:it|this|that) (?:\w+ )?work"
    r"|^\W*(?:\w+\W+)?(?:this|it)(?:'s|\s+is)?\s+(?:still\s+)?(?:isn'?t|not)\s+working\b"
    r"|\b(?:actually|just)\s+answer\s+(?:my|the)\s+question\b|\byou(?:'re|\s+are)\s+not\s+answering\b"
    r"|\byou\s+(?:didn'?t|did not|haven'?t|have not)\s+answer(?:ed)?\s+(?:my|the)\s+question\b"
    r"|\bwhy (?:is|does) (?:this|it|that) (?:have to be |need to be )?so (?:hard|difficult|complicated)\s*(?:[.!?]|$)"
    r"|\bdid you (?:even|actually) read (?:my|what)\b|\bdid you read what i (?:wrote|said|typed|asked)\b(?!\s+(?:in|on)\b)"
    r"|\byou(?:'re|\s+are)\s+(?:\w+\s+)?(?:confused|confusing\s+me)\b"
    r"|^\W*(?:(?:just|please|pls|now)\W+)?answer\s+(?:my|the)\s+question\s*(?:[.!,]|$)|\byou\s+(?:clearly|obviously)\s+(?:can'?t|cannot)\s+help\b"
    r"|\b(?:this|it)(?:'s|\s+is)\s+taking\s+(?:forever|so long|way too long|too long)\s*(?:[.!?,]|$)"
    r"|\b(?:forget it|never\s*mind)\W+(?:\w+\W+){0,4}?myself\b"
    r"|^\W*(?:hello|hey|hi)\W*\?+\W*(?:are you there|are you still there|(?:is )?anyone there|(?:is )?anybody there)\b"
    r"|\bare you still there\s*\?"
    r"|\byou(?:'re|\s+are)\s+(?:just\s+)?lying\b|\byou\s+(?:just\s+)?lied\b|\bstop\s+lying\b"
    r"|\bwhy (?:are|would) you (?:be\s+)?lying\b|\bare you lying to me\b"
    r"|\bwhy are you (?:so\s+)?(?:\w+\s+)?obsessed\b"
    r"|\bwhat(?:'s| is) wrong with you\b|\bi give up\b|\bi(?:'m| am) (?:getting|becoming) (?:\w+ )?"
    r"(?:frustrated|annoyed|irritated|angry|upset|tired of this)\b",
)
#: the user asks for a person
HUMAN = Cue(
    # not what happened before: "I talked to an agent yesterday", "I was transferred to a manager"
    r"\b(?:speak|talk|chat|connect|transfer|put|escalate)(?:s|ing)?\s+(?:me\s+)?(?:through\s+)?(?:to|with)\s+"
    r"(?:a|an|the|some|your)?\s*"
    r"(?:real\s+|live\s+)?(?:human|person|agent|representative|rep|manager|supervisor|operator|someone)\b"
    r"|\b(?:transfer|connect)(?:s|ing)?\s+(?:me\s+)?(?:to|with)\s+(?:the\s+|your\s+)?"
    r"(?:customer\s+(?:service|support|care)|support(?:\s+team)?)\b"
    r"|\b(?:get|give|find)\s+me\s+(?:a|an|the|some)\s+(?:real\s+|live\s+)?(?:human|person|agent|representative"
    r"|manager|supervisor|operator)\b"
    r"|\bis\s+there\s+(?:a|an|any)\s+(?:real\s+|live\s+)?(?:human|person|agent|representative)"
    r"(?:\s+i\s+(?:can|could)\b|\s*[!?.]*\s*$)"
    r"|\b(?:i|we)\s+(?:want|need|would\s+like|'d\s+like|demand)\s+(?:a|an)\s+(?:human|(?:real|live|actual)\s+"
    r"(?:person|agent)|human\s+agent|representative|operator|supervisor|manager)\b"
    r"|^\s*(?:an?\s+)?(?:human|real person|live agent|agent|representative|supervisor|manager"
    r"|customer service|customer support|customer care)(?:\s+please)?\s*[!?.]*\s*$",
)
#: a reply that offers a hand-off: accepting it is not friction
HANDOFF_OFFER = Folded(
    r"\btransfer\w*\b|\bhuman\b|\b(?:live |customer service )?agent\b|\brepresentative\b|\bsupervisor\b"
    r"|\bconnect you\b",
)
#: a message that opens by saying no to the reply
NEGATION_OPENING = Folded(r"^\W*(?:no|nope|nah|negative|not (?:quite|exactly|really|that one|this one))\b")
#: closings and thanks: "No, that's all", "Thank you!!!"
CLOSING = Folded(
    r"\b(?:that'?s|that is|that will be|that would be|that'?ll be|it'?s|this is)\s+(?:\w+\s+)?"
    r"(?:all|it|everything|enough)\b"
    r"|\bthank|\bthanks\b|\bthx\b|\bappreciate\b|\bbye\b|\bnothing\b|\bi'?m (?:all )?(?:good|set|done|fine)\b",
)
#: declining an offer or answering a question about preferences ("No, not now", "No preference")
DECLINE = Cue(
    r"\bnot (?:right )?(?:now|yet|today|for now|at (?:the|this) (?:moment|time|point))\b|\bmaybe later\b|\blater\b"
    r"|\bno need\b|\bnot (?:necessary|needed|required|interested|important|a problem)\b"
    r"|\b(?:don'?t|do not|won'?t|will not)\s+(?:really\s+)?(?:need|want|wish|care|mind|have)\b"
    r"|\bno (?:problem|worries|preference|particular|specific)\b|\b(?:doesn'?t|does not) matter\b"
    r"|\bany\w*\s+(?:\w+\s+)?(?:is|are|will be|would be|works?)\s+(?:fine|ok|okay|good)\b|\bno,? thanks?\b"
    r"|^\W*no\W+but\b|\b(?:that|it)(?:'s|\s+is|\s+was)\s+(?:\w+\s+)?(?:fine|ok|okay|good|great)\b",
)
#: the message offers a replacement: a value or a statement of what the user wants
REPLACEMENT = Cue(
    r"\d|\b(?:i|we)\s+(?:\w+\s+)?(?:want|need|would like|wanted|meant|said|asked|prefer|will be|'ll be)\b"
    r"|\b(?:i|we)'d\b|\bmake (?:it|that)\b|\binstead\b|\bactually\b|\brather\b|\bchange\b|\bshould be\b"
    r"|\b(?:it'?s|it is|that'?s|that is)\s+(?:for|on|at|in|from|to)\b"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten)\b"
    r"|^\W*(?:no|nope|nah)\W+(?:i\s+(?:meant|mean|said|want(?:ed)?)\s+)?the other\b"
    r"|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:today|tomorrow|tonight)\b"
    r"|\b(?:january|february|march|april|june|july|august|september|october|november|december)\b",
)
#: a reply that offers something or asks an open question: "no" to it is an answer, not a correction
OFFER_OR_QUESTION = Folded(
    r"\b(?:would|do|did|will) you (?:like|want|wish|need|care|prefer|have)\b|\b(?:shall|should|can|may|could) i\b"
    r"|\bare you (?:interested|looking)\b|\bwant me to\b|\banything else\b|\bsomething else\b|\bany other\b"
    r"|\bparticular\b|\bpreference\b|\bspecific\b|\bis there\b",
)
#: a reply that states or checks a detail: "no" to it corrects the detail
CONFIRMATION = Folded(
    r"\bconfirm|\b(?:is|does) (?:that|this|it|everything) (?:\w+ )?(?:correct|right|ok(?:ay)?|sound|look)\b"
    r"|\b(?:correct|right)\s*[?.]|\bjust to (?:confirm|verify|make sure|be sure|clarify|double)"
    r"|\b(?:let me|to) (?:make sure|verify|double[- ]check|see if i)|\bplease (?:review|verify|check)\b"
    r"|\bdid you (?:mean|say|want)\b|\bhere'?s what i (?:have|got|heard)\b|\bto recap\b",
)

#: "the 11th, not the 1st", "Saturday not Friday": a value put in place of another (original case kept)
_NOT_VALUE = re.compile(r"\bnot\s+(?:(?:the|a|an|on|at|for|in|from|to)\s+)?([\w:.]+)", re.IGNORECASE)
#: the value just before that "not" (searched for up to it)
_VALUE_BEFORE = re.compile(r"([\w:.]{1,40})\s{0,5},?\s{1,5}(?:and\s{1,5})?$")  # bounded: linear on any text
#: the words of a reply, as values are compared ("7:00" stays whole)
_REPLY_WORD = re.compile(r"[\w:]+")
#: words that name a value although written in lower case
_VALUE_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july august"
    " september october november december today tomorrow tonight yesterday morning afternoon evening noon midnight"
    " one two three four five six seven eight nine ten eleven twelve".split()
)


def _value(text: str, at: int, word: str) -> str | None:
    """The word at `at`, lower-cased, when it names a value: a number or code, a day, a time, or a
    name (capitalised, not at the start of a sentence, not "I"); else None."""
    low = word.strip(".").lower()
    if any(c.isdigit() for c in low) or low in _VALUE_WORDS:
        return low
    before = text[:at].rstrip()
    if word[:1].isupper() and low not in ("i", "i'm") and before and before[-1] not in ".!?":
        return low
    return None


def replaces_a_stated_value(text: str, reply: str) -> bool:
    """A correction: "I meant Saturday, not Friday" after a reply that said Friday (and not Saturday)."""
    if not reply or not could_match(text, ("not",)):
        return False
    said = None
    for m in _NOT_VALUE.finditer(text):
        stated = _value(text, m.start(1), m.group(1))
        before = _VALUE_BEFORE.search(text, max(0, m.start() - 40), m.start()) if stated is not None else None
        wanted = _value(text, before.start(1), before.group(1)) if before is not None else None
        if wanted is None or wanted == stated:
            continue
        said = said if said is not None else frozenset(_REPLY_WORD.findall(reply.lower()))
        if stated in said and wanted not in said:
            return True
    return False


#: Literal pieces (lower case) one of which every match of a pattern holds: a cheap gate. Keep in step
#: with the patterns: each alternative of the pattern must contain one of its pieces.
#: A piece is as narrow as the patterns allow, since common words open the gate for nothing: " read"
#: (the patterns have a space before it) rather than "read", which "already" and "ready" hold; "cant"
#: beside "n't" rather than "can", which "cancel" and "can you" hold.
DISPUTE_NEEDS = (
    "not", "n't", "isn", "wasn", "aren", "wrong", "incorrect", "mistaken", "misunderstood", "misheard", "misread",
    "mixed", "mistake", "error", "misunderstanding", "mix", "confusion", "never", "did", "sure", "cant", "believe",
    "sense", "think you", "why would", "broken", "crash", "fail", "throw", "break", "same error", "same problem",
    "same issue", "same bug", "same result", "same output", "false", "untrue", "broke", "worse", "exception",
    "bug", "made", "making", "nothing", "still the same",
)  # fmt: skip
REMINDER_NEEDS = ("already", "just", "said", "told", "mentioned", "asked", "explained", "wrote", "again", "time")
RETRY_NEEDS = ("again", "check", "try", "keep")
ANNOYANCE_NEEDS = (
    "useless", "pathetic", "incompetent", "hopeless", "stupid", "dumb", "frustrat", "annoy", "ridiculous", "absurd",
    "unacceptable", "help", "joke", "waste", "kidding", "joking", "serious", "listen", " read", "understand",
    "making sense", "get it", "why", "wrong", "give up", "fail", "irritated", "angry", "upset", "tired of this",
    "keep", "repeat", "stop", "working", "answer", "taking", "useful", "suggested",
    "recommended", "showed", "offered", "myself", "you there", "still there", "one there", "body there",
    "lying", "lied", "obsessed", "gave", "sent", "said", "wrote", "wtf", "ffs", "wasting", "ignor", "getting it", "confus",
    "pointless", "read my", "come on", "ugh", "argh", "smh", "omfg", "jeez", "geez", "sigh", "again?", "again ?", "again!", "again !", "not again", "sake",
)  # fmt: skip
HUMAN_NEEDS = (
    "human", "person", "agent", "rep", "manager", "supervisor", "operator", "someone", "transfer", "connect",
    "customer service", "customer support", "customer care",
)  # fmt: skip


def reads(pattern: Folded, needs: tuple[str, ...], text: str, low: str | None) -> bool:
    """`pattern` found in `text` behind its gate `needs` (`could_match`); `low` is the text lower-cased
    when it is ASCII, else None, so that a message is lower-cased once for all its cues."""
    if low is None:
        return bool(pattern.search(text))
    return holds_any(low, needs) and bool(pattern.search_lower(low))


def says_no_to_a_detail(text: str, reply: str) -> bool:
    """A correction: the message opens with "no" to a reply that checked or stated a detail, and gives a
    replacement. "No" to an offer or to an open question, a decline ("No, but ...", "No, that's fine")
    and a closing are not corrections."""
    if not reply or not NEGATION_OPENING.search(text) or CLOSING.search(text) or DECLINE.search(text):
        return False
    if not REPLACEMENT.search(text):
        return False
    if CONFIRMATION.search(reply):
        return True
    return not OFFER_OR_QUESTION.search(reply)


def asks_for_a_human(text: str, reply: str) -> bool:
    """An unprompted request for a person; accepting the assistant's own offer of a transfer is not one."""
    return could_match(text, HUMAN_NEEDS) and bool(HUMAN.search(text)) and not (reply and HANDOFF_OFFER.search(reply))


def retries_after_failure(text: str, reply: str) -> bool:
    """The user asks the assistant to try again after a reply that reported a failure or found nothing."""
    if not reply or not could_match(text, RETRY_NEEDS) or not RETRY.search(text) or not FAILURE_REPLY.search(reply):
        return False
    return any(RETRY.search(s) and REQUEST.search(s) for s in sentences(text))
